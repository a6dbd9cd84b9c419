import Foundation
import NIOConcurrencyHelpers

/// Room kept for the state directory's own writes: a file of `size` bytes beside the database
/// (`space-reserve`, allocated with `posix_fallocate`). When the file system is full (a download
/// beside it filled it, as `~/Downloads` and `~/.local/state` on one disk do), a write that gets
/// `SQLITE_FULL` releases the reserve and is tried once more, so a task's failure, pause or
/// cancellation is still recorded and nothing comes back after a restart. New work is refused
/// (`StorageFull`) until the reserve can be made again.
public final class StorageReserve: Sendable {
    public let path: String
    public let size: Int
    private let state = NIOLockedValueBox(())

    public init(directory: String, size: Int = 4 << 20) {
        path = directory + "/space-reserve"
        self.size = size
    }

    /// Whether the reserve is in place, making it again if it was released; false when the
    /// file system has no room for it.
    public func ensure() -> Bool {
        state.withLockedValue { _ in
            var info = stat()
            if stat(path, &info) == 0, info.st_size >= size, info.st_blocks * 512 >= Int64(size) { return true }
            let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            guard posix_fallocate(fd, 0, off_t(size)) == 0 else {
                _ = ftruncate(fd, 0)
                return false
            }
            return true
        }
    }

    /// Gives the reserve's room back to the file system; false if there was none to give.
    @discardableResult
    public func release() -> Bool {
        state.withLockedValue { _ in
            var info = stat()
            guard stat(path, &info) == 0, info.st_blocks > 0 else { return false }
            return unlink(path) == 0
        }
    }
}
