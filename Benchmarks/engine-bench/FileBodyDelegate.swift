import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Reads a response's body on the event loop; with a path, writes it as the engine does (a
/// partial file beside the target, `fdatasync`, rename, the directory synced), without its queues.
final class FileBodyDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Void
    struct Failed: Error { let what: String }
    let path: String?
    var fd: Int32 = -1
    var offset: Int64 = 0
    var status: UInt = 0

    init(path: String?) { self.path = path }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        status = head.status.code
        if let path {
            fd = open(path + ".part", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        if fd >= 0 {
            buffer.withUnsafeReadableBytes { bytes in
                _ = pwrite(fd, bytes.baseAddress, bytes.count, off_t(offset))
            }
        }
        offset += Int64(buffer.readableBytes)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        guard status == 200 else { throw Failed(what: "status \(status)") }
        guard let path else { return }
        guard fd >= 0, fdatasync(fd) == 0, close(fd) == 0, rename(path + ".part", path) == 0 else {
            throw Failed(what: "writing \(path): errno \(errno)")
        }
        let directory = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(directory) }
        guard directory >= 0, fsync(directory) == 0 else { throw Failed(what: "syncing the directory: errno \(errno)") }
    }
}
