#if canImport(Glibc)
import Glibc
#endif

/// Which file an upload sends, as it was when `Upload` was called: device, inode, size and
/// modification time. Checked at each attempt's start and at its end, so a file that changed
/// while it was sent fails the task (`SourceChanged`) instead of reaching the server half old,
/// half new.
public struct SourceIdentity: Sendable, Hashable, Codable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// Modification time: seconds and nanoseconds since the epoch.
    public var modifiedSeconds: Int64
    public var modifiedNanoseconds: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, modifiedSeconds: Int64, modifiedNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modifiedSeconds = modifiedSeconds
        self.modifiedNanoseconds = modifiedNanoseconds
    }

    /// The identity of an open regular file, or nil when `fd` is no such file.
    public static func of(descriptor fd: Int32) -> SourceIdentity? {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return SourceIdentity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modifiedSeconds: Int64(info.st_mtim.tv_sec), modifiedNanoseconds: Int64(info.st_mtim.tv_nsec)
        )
    }

    /// What differs from `recorded`, in words, or nil when nothing does.
    public func change(from recorded: SourceIdentity) -> String? {
        if device != recorded.device || inode != recorded.inode {
            return "it is another file now (replaced or renamed over)"
        }
        if size != recorded.size { return "its size changed from \(recorded.size) to \(size) bytes" }
        if modifiedSeconds != recorded.modifiedSeconds || modifiedNanoseconds != recorded.modifiedNanoseconds {
            return "it was modified"
        }
        return nil
    }

    enum CodingKeys: String, CodingKey {
        case device, inode, size
        case modifiedSeconds = "mtime_sec"
        case modifiedNanoseconds = "mtime_nsec"
    }
}
