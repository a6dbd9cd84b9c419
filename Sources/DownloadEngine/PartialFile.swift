#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers

/// The partial file of one transfer: positioned writes, truncation, fdatasync.
/// Thread-safe: writes happen on an event loop, syncs on a background queue.
final class PartialFile: Sendable {
    let fd: Int32
    let path: String
    private let closed = NIOLockedValueBox(false)

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close() }

    func close() {
        let wasOpen = closed.withLockedValue { closed -> Bool in
            defer { closed = true }
            return !closed
        }
        if wasOpen { Glibc.close(fd) }
    }

    var size: Int64 {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return 0 }
        return Int64(info.st_size)
    }

    func truncate(to length: Int64) throws {
        guard ftruncate(fd, off_t(length)) == 0 else {
            throw DownloadError.file("cannot truncate \(path): \(errnoText())")
        }
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw DownloadError.file("cannot write \(path): \(errnoText())")
            }
            done += n
        }
    }

    var isClosed: Bool { closed.withLockedValue { $0 } }

    /// A closed file has nothing left to sync (it was synced before it was closed).
    func sync() throws {
        guard !isClosed else { return }
        guard fdatasync(fd) == 0 else { throw DownloadError.file("cannot sync \(path): \(errnoText())") }
    }
}
