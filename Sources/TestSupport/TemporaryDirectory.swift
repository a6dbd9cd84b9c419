import Foundation

/// A fresh directory under the system temporary directory (`TMPDIR`), removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "downloads-test") throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        path = String(cString: made)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    /// Removes the directory, unless `DOWNLOADS_TEST_KEEP` is set (to read a test's logs after it).
    public func remove() {
        guard ProcessInfo.processInfo.environment["DOWNLOADS_TEST_KEEP"] == nil else { return }
        try? FileManager.default.removeItem(atPath: path)
    }
}
