import Foundation

/// Reads a child's output as it is written, so a test can wait for a line and then stop the
/// child, instead of sleeping and reading the pipe whole after the exit.
public final class OutputCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var collected = ""
    private var reader: Task<Void, Never>?

    /// Starts reading `handle` until end of file.
    public init(_ handle: FileHandle) {
        reader = Task.detached { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                lock.withLock { collected += String(decoding: data, as: UTF8.self) }
            }
        }
    }

    /// What has been read so far.
    public var text: String { lock.withLock { collected } }

    /// Waits until the writer closed its end (the child exited), then returns everything.
    public func finish() async -> String {
        await reader?.value
        return text
    }
}
