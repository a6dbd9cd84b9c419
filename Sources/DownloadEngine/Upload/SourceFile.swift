import DownloadModel
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// The open file an upload reads (the caller's, opened as them, or the descriptor it handed
/// over): read with `pread` only, so one descriptor serves every attempt, and closed when the
/// last reader lets go (a request's body may still be reading when its attempt is given up).
final class SourceFile: Sendable {
    let descriptor: Int32

    /// Takes ownership of `descriptor`.
    init(owning descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// A duplicate of a descriptor a caller handed over (`UploadAt`): a regular file open for
    /// reading, else a `FileError` saying why.
    static func duplicating(_ fd: Int32) throws -> SourceFile {
        let mode = fcntl(fd, F_GETFL)
        guard mode >= 0 else { throw DownloadError.file("the source descriptor is not open") }
        // An O_PATH descriptor names a file without the right to read it: refused before
        // anything of the task goes out.
        guard mode & Self.pathOnly == 0 else {
            throw DownloadError.file(
                "the source descriptor was opened with O_PATH, which cannot read; open the file for reading")
        }
        guard (mode & O_ACCMODE) == O_RDONLY || (mode & O_ACCMODE) == O_RDWR else {
            throw DownloadError.file("the source descriptor is not open for reading")
        }
        guard SourceIdentity.of(descriptor: fd) != nil else {
            throw DownloadError.file("the source descriptor is not a regular file")
        }
        let copy = duplicate(fd)
        guard copy >= 0 else { throw DownloadError.file("the source descriptor cannot be duplicated: \(errnoText())") }
        return SourceFile(owning: copy)
    }

    /// A new descriptor of the same open file, close-on-exec and above the standard three; -1
    /// with `errno` set when there is none.
    static func duplicate(_ fd: Int32) -> Int32 { fcntl(fd, F_DUPFD_CLOEXEC, 3) }

    /// Linux's `O_PATH` (Glibc's module does not export it).
    static let pathOnly: Int32 = 0o10_000_000

    /// The file's identity now (nil: no longer a regular file one can inspect).
    var identity: SourceIdentity? { SourceIdentity.of(descriptor: descriptor) }

    /// Up to `count` bytes at `offset` (fewer only at the file's end); blocking: call it on the
    /// task's I/O queue.
    func read(_ count: Int, at offset: Int64) throws -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: count)
        var failure: Int32 = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
            guard let base = raw.baseAddress else { return 0 }
            var done = 0
            while done < count {
                let n = pread(descriptor, base + done, count - done, off_t(offset) + off_t(done))
                if n > 0 {
                    done += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    if n < 0 { failure = errno }
                    break
                }
            }
            return done
        }
        if failure != 0 { throw DownloadError.file("cannot read the file to upload: \(errnoText(failure))") }
        return buffer
    }
}
