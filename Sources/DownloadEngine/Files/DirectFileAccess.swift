import DownloadModel
import UserFiles
import FileIdentities

/// File access in the daemon's own process, with its own credentials: for the daemon's own user
/// (the session bus), and for every owner in tests that run as one user.
public struct DirectFileAccess: FileAccess, FileAccessProvider {
    private let operations: UserFileOperations

    public init(anchor: DescriptorAnchor? = nil) {
        operations = UserFileOperations(anchor: anchor)
    }

    public func files(for owner: UInt32) -> any FileAccess { self }

    public func files(for owner: UInt32, below anchor: DescriptorAnchor) -> any FileAccess {
        DirectFileAccess(anchor: anchor)
    }

    public func openPartial(_ path: String, reuse: PartialReuse) throws -> OpenedPartial {
        try mapped(path) { try operations.openPartial(path, reuse: reuse) }
    }

    public func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes?
    ) throws -> AttributeWrite {
        try mapped(destination) {
            try operations.publish(
                partial, identity: identity, to: destination, replace: replace, mode: mode, origin: origin)
        }
    }

    public func remove(_ path: String) throws {
        try mapped(path) { try operations.remove(path) }
    }

    public func isDirectory(_ path: String) -> Bool { operations.isDirectory(path) }

    public func isWritableDirectory(_ path: String) -> Bool { operations.isWritableDirectory(path) }

    public func exists(_ path: String) -> Bool { operations.exists(path) }

    public func isFile(_ path: String, identity: FileIdentity) -> Bool { operations.isFile(path, identity: identity) }

    public func openForReading(_ path: String) throws -> Int32 {
        try mapped(path) { try operations.openForReading(path).descriptor }
    }

    public func openAppInfo(pid: UInt32) throws -> Int32? {
        try mapped("/proc/\(pid)/root/.flatpak-info") { try operations.openAppInfo(pid: pid) }
    }

    public func makeDirectories(_ relative: String, below base: String, mode: UInt32?) throws {
        try mapped(base + "/" + relative) { try operations.makeDirectories(relative, below: base, mode: mode) }
    }

    private func mapped<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as FileOperationError {
            throw error.downloadError(path: path)
        }
    }
}
