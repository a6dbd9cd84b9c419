#if canImport(Glibc)
import DownloadModel
import Glibc
#endif

/// Writes all of `bytes` at `offset` of `descriptor` with `pwrite`, again after EINTR and after a
/// short write; a failure is `FileError` with `failure` and the system's reason. Blocking: on a
/// task's I/O queue.
func writeFully(
    _ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, failure: @autoclosure () -> String
) throws {
    guard let base = bytes.baseAddress else { return }
    var done = 0
    while done < bytes.count {
        let n = pwrite(descriptor, base + done, bytes.count - done, off_t(offset) + off_t(done))
        if n < 0 {
            if errno == EINTR { continue }
            throw DownloadError.file("\(failure()): \(errnoText())")
        }
        done += n
    }
}
