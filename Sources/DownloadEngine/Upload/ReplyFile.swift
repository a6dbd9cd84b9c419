import Dispatch
import DownloadModel
import NIOConcurrencyHelpers
import NIOCore
import UserFiles
#if canImport(Glibc)
import Glibc
import FileIdentities
#endif

/// An upload's reply written to the file the caller named (`reply_destination`), as a
/// download's body is: into a hidden partial file beside it, made as the caller (through their
/// file helper on the system bus), written on the task's I/O queue, synced and renamed into
/// place when the upload finishes, removed when it does not.
final class ReplyFile: Sendable {
    /// The task's I/O queue.
    private let io: DispatchQueue
    private let access: any FileAccess
    private let partial: String
    private let destination: String
    private let mode: UInt32?
    /// The partial file, once made (touched only on the task's I/O queue).
    private let opened = NIOLockedValueBox<(descriptor: Int32, identity: FileIdentity, size: Int64)?>(nil)

    init(io: DispatchQueue, access: any FileAccess, partial: String, destination: String, mode: UInt32?) {
        self.io = io
        self.access = access
        self.partial = partial
        self.destination = destination
        self.mode = mode
    }

    deinit {
        if let descriptor = opened.withLockedValue({ $0?.descriptor }) { close(descriptor) }
    }

    /// Appends `buffer` (on the I/O queue); the future completes once it is written.
    func append(_ buffer: ByteBuffer, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        io.async { [self] in
            promise.completeWith(Result { try write(buffer) })
        }
        return promise.futureResult
    }

    /// Syncs the file and renames it to the destination (an empty file for an empty reply).
    func publish() async throws {
        try await io.perform { [self] in
            let file = try openIfNeeded()
            guard fdatasync(file.descriptor) == 0 else {
                throw DownloadError.file("cannot sync the reply file: \(errnoText())")
            }
            try access.publish(partial, identity: file.identity, to: destination, replace: true, mode: mode)
        }
    }

    /// Removes the partial file (an upload that did not finish, or a reply before a retry).
    func discard() async {
        try? await io.perform { [self] in
            if let descriptor = opened.withLockedValue({ file -> Int32? in
                defer { file = nil }
                return file?.descriptor
            }) {
                close(descriptor)
            }
            try access.remove(partial)
        }
    }

    private func openIfNeeded() throws -> (descriptor: Int32, identity: FileIdentity, size: Int64) {
        if let file = opened.withLockedValue({ $0 }) { return file }
        let made = try access.openPartial(partial, reuse: .never)
        let file = (descriptor: made.descriptor, identity: made.identity, size: Int64(0))
        opened.withLockedValue { $0 = file }
        return file
    }

    private func write(_ buffer: ByteBuffer) throws {
        let file = try openIfNeeded()
        try buffer.withUnsafeReadableBytes { raw in
            try writeFully(file.descriptor, raw, at: file.size, failure: "cannot write the reply to \(partial)")
        }
        let offset = file.size + Int64(buffer.readableBytes)
        opened.withLockedValue { $0?.size = offset }
    }
}
