import FileIdentities

#if canImport(Glibc)
import Glibc
#endif

/// One file offered to the local network by its SHA-256: which file it is (so that a file
/// changed, moved or swapped since is never served), whose it is, and how long and how often it
/// is offered.
public struct SharedFile: Sendable, Equatable {
    /// Lowercase hexadecimal.
    public var sha256: String
    /// The name it is offered under (the file's own name).
    public var name: String
    public var path: String
    /// The user whose file it is (read as that user) and the app that shared it ("" for none).
    public var owner: UInt32
    public var app: String
    /// The task whose finished file it is.
    public var task: UInt64
    /// What the file was when it was shared: its device and inode, size and modification time
    /// (nanoseconds since the epoch). Compared before every answer.
    public var identity: FileIdentity
    public var size: Int64
    public var modified: Int64
    /// Unix seconds after which it is withdrawn.
    public var expires: Int64
    /// Downloads after which it is withdrawn, counted in bytes served (`shares`).
    public var shareLimit: UInt32
    /// Bytes served so far, every range of every client.
    public var bytesServed: Int64 = 0

    public init(
        sha256: String, name: String, path: String, owner: UInt32, app: String, task: UInt64, identity: FileIdentity,
        size: Int64, modified: Int64, expires: Int64, shareLimit: UInt32
    ) {
        self.sha256 = sha256
        self.name = name
        self.path = path
        self.owner = owner
        self.app = app
        self.task = task
        self.identity = identity
        self.size = size
        self.modified = modified
        self.expires = expires
        self.shareLimit = shareLimit
    }

    /// Whole downloads served: the bytes served over the size, so that the several ranges one
    /// client (or several) took of it count once.
    public var shares: UInt32 {
        guard size > 0 else { return bytesServed > 0 ? UInt32(clamping: bytesServed) : 0 }
        return UInt32(clamping: bytesServed / size)
    }

    /// Whether `info` (an `fstat` of the file opened now) is still the file that was shared: a
    /// regular file of the same device, inode, size and modification time, not removed (a
    /// descriptor held since it was shared outlives its last name).
    public func isStill(_ info: stat) -> Bool {
        (info.st_mode & S_IFMT) == S_IFREG && info.st_nlink > 0
            && FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)) == identity
            && Int64(info.st_size) == size && Self.nanoseconds(info.st_mtim) == modified
    }

    /// The file opened with `open` (as its owner may), if it is still the file that was shared;
    /// nil when it cannot be opened or changed (the descriptor closed then).
    public func openIfUnchanged(with open: (SharedFile) throws -> Int32) -> Int32? {
        guard let descriptor = try? open(self) else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, isStill(info) else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// A `timespec` as nanoseconds since the epoch (`modified`).
    public static func nanoseconds(_ time: timespec) -> Int64 {
        Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Whether it is still offered at `now` (Unix seconds).
    public func isOffered(at now: Int64) -> Bool { now < expires && shares < shareLimit }
}
