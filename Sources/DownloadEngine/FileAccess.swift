#if canImport(Glibc)
import Glibc
#endif

/// Every file the engine opens, renames or removes goes through this, so that the system-bus
/// service can do it with the task owner's credentials instead of the daemon's.
public protocol FileAccess: Sendable {
    /// Opens (creating with mode 0600 if needed) a partial file for reading and writing.
    func openPartial(_ path: String) throws -> Int32
    /// Renames atomically; without `replace`, fails with `FileExists` if `to` exists.
    func rename(_ from: String, to: String, replace: Bool) throws
    /// Removes a file; a missing file is not an error.
    func remove(_ path: String) throws
    func isDirectory(_ path: String) -> Bool
    func exists(_ path: String) -> Bool
    /// fsyncs a directory so a rename in it is durable.
    func syncDirectory(_ path: String)
}

/// File access as the daemon's own user (the session bus).
public struct DirectFileAccess: FileAccess {
    public init() {}

    public func openPartial(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw DownloadError.file("cannot open \(path): \(errnoText())") }
        return fd
    }

    public func rename(_ from: String, to: String, replace: Bool) throws {
        if replace {
            guard Glibc.rename(from, to) == 0 else {
                throw DownloadError.file("cannot rename \(from) to \(to): \(errnoText())")
            }
            return
        }
        // link() fails with EEXIST instead of replacing: no window in which an existing file
        // could be overwritten. Filesystems without hard links fall back to a checked rename.
        if link(from, to) == 0 {
            unlink(from)
            return
        }
        let code = errno
        if code == EEXIST { throw DownloadError.fileExists(to) }
        guard code == EPERM || code == EOPNOTSUPP || code == EMLINK else {
            throw DownloadError.file("cannot move \(from) to \(to): \(errnoText(code))")
        }
        guard !exists(to) else { throw DownloadError.fileExists(to) }
        guard Glibc.rename(from, to) == 0 else {
            throw DownloadError.file("cannot rename \(from) to \(to): \(errnoText())")
        }
    }

    public func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT {
            throw DownloadError.file("cannot remove \(path): \(errnoText())")
        }
    }

    public func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    public func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    public func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}

func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
