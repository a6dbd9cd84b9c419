import AsyncHTTPClient
import DownloadModel
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// One request of an upload as it goes: counts the body's bytes as they are written to the
/// connection (the task's progress), and keeps the response: its status and headers, and its
/// body, either into memory (at most `UploadSpec.maxKeptReply` bytes, for `GetReply`) or
/// through `sink` into the reply's file. A connection on which nothing moves either way for the
/// stall timeout is ended (`Timeout`), as a download's is.
final class UploadDelegate: ResponseReceiver, @unchecked Sendable {
    struct Result: Sendable {
        var status: Int
        var headers: HTTPHeaders
        /// The body as kept in memory (empty when `sink` took it).
        var body: [UInt8]
        var bodyBytes: Int64
        /// Bytes of the request's body written to the connection.
        var sent: Int64
    }

    /// Where a body goes that is not kept in memory: each part handed over in order; the future
    /// completes once it is written (the backpressure).
    typealias Sink = @Sendable (ByteBuffer, EventLoop) -> EventLoopFuture<Void>

    private let sent: @Sendable (Int64) -> Void
    /// Chosen once the head came: a sink for a 2xx when the task has a reply file.
    private let sinkFor: @Sendable (Int) -> Sink?
    private let stallTimeout: TimeAmount

    // Event-loop state (the request's loop), read by `partialResult` only after the request ended.
    private var status = 0
    private var headers = HTTPHeaders()
    private var body: [UInt8] = []
    private var bodyBytes: Int64 = 0
    private var sentBytes: Int64 = 0
    private var sink: Sink?
    private var lastMoved = NIODeadline.now()
    private var watchdog: RepeatedTask?
    private let headSent = NIOLockedValueBox(false)

    /// `sent`: the body's bytes written so far (called on the event loop, each part);
    /// `sink`: for a final status, where its body goes instead of memory (nil: kept).
    init(stallTimeout: Double, sent: @escaping @Sendable (Int64) -> Void, sink: @escaping @Sendable (Int) -> Sink?) {
        self.sent = sent
        sinkFor = sink
        self.stallTimeout = .milliseconds(Int64(max(1, stallTimeout) * 1000))
    }

    var requestHeadSent: Bool { headSent.withLockedValue { $0 } }

    var partialResult: Result? {
        status == 0 ? nil : Result(status: status, headers: headers, body: body, bodyBytes: bodyBytes, sent: sentBytes)
    }

    func interrupt(on eventLoop: EventLoop) {
        eventLoop.execute { self.stopWatchdog() }
    }

    func didSendRequestHead(task: HTTPClient.Task<Result>, _ head: HTTPRequestHead) {
        headSent.withLockedValue { $0 = true }
        lastMoved = .now()
        // Nothing sent and nothing heard for the stall timeout: the request ends as `Timeout`.
        let limit = stallTimeout
        watchdog = task.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [self] repeated in
            guard NIODeadline.now() - lastMoved > limit else { return }
            repeated.cancel()
            task.fail(reason: DownloadError.timeout("nothing was sent or received for \(limit.nanoseconds / 1_000_000_000) s"))
        }
    }

    func didSendRequestPart(task: HTTPClient.Task<Result>, _ part: IOData) {
        sentBytes += Int64(part.readableBytes)
        lastMoved = .now()
        sent(sentBytes)
    }

    func didReceiveHead(task: HTTPClient.Task<Result>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        lastMoved = .now()
        status = Int(head.status.code)
        headers = head.headers
        sink = sinkFor(status)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Result>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        lastMoved = .now()
        bodyBytes += Int64(buffer.readableBytes)
        if let sink { return sink(buffer, task.eventLoop) }
        let room = UploadSpec.maxKeptReply - body.count
        if room > 0 { body += buffer.readableBytesView.prefix(room) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveError(task: HTTPClient.Task<Result>, _ error: Error) {
        stopWatchdog()
    }

    func didFinishRequest(task: HTTPClient.Task<Result>) throws -> Result {
        stopWatchdog()
        return Result(status: status, headers: headers, body: body, bodyBytes: bodyBytes, sent: sentBytes)
    }

    private func stopWatchdog() {
        watchdog?.cancel()
        watchdog = nil
    }
}
