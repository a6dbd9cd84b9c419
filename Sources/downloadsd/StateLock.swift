import Foundation

/// One daemon per state directory: `daemon.lock` in it, held (`flock`) for the daemon's life and
/// let go by the kernel at its end, however it ends. An instance D-Bus activation starts while the
/// last one is still leaving (it gave up the bus name first, then finishes its calls) waits here
/// before it reads the store.
enum StateLock {
    static let fileName = "daemon.lock"

    /// Takes the lock without waiting: its descriptor (kept open for the life of the process), or
    /// nil when another process holds it.
    static func take(in directory: String) throws -> Int32? {
        let path = directory + "/" + fileName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw StateDirectory.Refusal(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return fd }
        let failure = errno
        close(fd)
        guard failure == EWOULDBLOCK else {
            throw StateDirectory.Refusal(description: "cannot lock \(path): \(String(cString: strerror(failure)))")
        }
        return nil
    }
}
