import AsyncHTTPClient
import DownloadModel
import NIOCore
import NIOHTTP1
import Synchronization

/// One request of an upload as it goes: counts the body's bytes as they are written to the
/// connection (the task's progress), and keeps the response: its status and headers, and its
/// body, either into memory (at most `UploadSpec.maxKeptReply` bytes, for `GetReply`) or
/// through `sink` into the reply's file. A connection on which nothing moves either way for the
/// stall timeout, or whose body goes slower than `low_speed_limit` for `low_speed_time`, is
/// ended (`Timeout`), as a download's is (`BodyProgress`).
final class UploadDelegate: RequestEvents, @unchecked Sendable {
    typealias Response = Result

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
    /// The stall timeout and the minimum speed (`low_speed_*`), as a download's body has them.
    private let settings: BodyProgress.Settings
    /// The bandwidth limit now (a slow body held to it is no slow server).
    private let limit: @Sendable () -> UInt64
    /// The head is all that is wanted (a probe): the request ends once it came.
    private let headOnly: Bool
    /// The request body's length: a final answer of 300 or more before it was all written is
    /// an early answer (see `receivedHead`).
    private let bodyLength: Int64
    /// How long an early answer's body without a length may pause before it counts as ended.
    static let earlyAnswerQuiet: TimeAmount = .seconds(2)

    // Event-loop state (the request's loop), read by `partialResult` only after the request ended.
    private var status = 0
    private var headers = HTTPHeaders()
    private var body: [UInt8] = []
    private var bodyBytes: Int64 = 0
    private var sentBytes: Int64 = 0
    private var sink: Sink?
    /// An early answer's body length (nil: not an early answer; -1: no length given).
    private var earlyAnswerLength: Int64?
    private var lastMoved = NIODeadline.now()
    private var progress: BodyProgress?
    private var watchdog: RepeatedTask?
    /// Whether the head went out (set on the event loop, read after the request ended: an atomic flag).
    private let headSent = Atomic<Bool>(false)
    /// For its `TransactionMetrics` (read after the request ended).
    private var marked = RequestMarks()
    var marks: RequestMarks {
        var marks = marked
        marks.bytesSent = sentBytes
        marks.bytesReceived = bodyBytes
        return marks
    }

    /// `sent`: the body's bytes written so far (called on the event loop, each part);
    /// `sink`: for a final status, where its body goes instead of memory (nil: kept).
    init(
        settings: BodyProgress.Settings, limit: @escaping @Sendable () -> UInt64 = { 0 }, headOnly: Bool = false,
        bodyLength: Int64 = 0, sent: @escaping @Sendable (Int64) -> Void, sink: @escaping @Sendable (Int) -> Sink?
    ) {
        self.sent = sent
        self.headOnly = headOnly
        self.bodyLength = bodyLength
        sinkFor = sink
        self.settings = settings
        self.limit = limit
    }

    var requestHeadSent: Bool { headSent.load(ordering: .acquiring) }

    /// Bytes of the request's body written to the connection (read after the request ended).
    var bodySent: Int64 { sentBytes }

    var partialResult: Result? {
        status == 0 ? nil : Result(status: status, headers: headers, body: body, bodyBytes: bodyBytes, sent: sentBytes)
    }

    func interrupt(on eventLoop: EventLoop) {
        eventLoop.execute { self.stopWatchdog() }
    }

    // MARK: The request's events (on its event loop; AsyncHTTPClient's callbacks are
    // `RequestEvents+AsyncHTTPClient`'s, a forwarded request calls these itself)

    func sentHead(_ request: InFlightRequest) {
        headSent.store(true, ordering: .releasing)
        marked.sentHead()
        let now = NIODeadline.now()
        lastMoved = now
        // The body is measured as a download's is (`BodyProgress`): nothing sent or heard for
        // the stall timeout, or a body slower than `low_speed_limit` for `low_speed_time`, ends
        // the request as `Timeout`. A redirect's hop on the same request starts it again.
        var measured = BodyProgress(settings: settings, now: now)
        if bodyLength > 0 { measured.sendingBody(limit: limit(), at: now) } else { measured.bodyWent(at: now) }
        progress = measured
        guard watchdog == nil else { return }
        watchdog = request.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) {
            [self] repeated in
            let now = NIODeadline.now()
            if earlyAnswerLength == -1, now - lastMoved > Self.earlyAnswerQuiet {
                // An early answer with no length, quiet since its last byte: it is what came.
                repeated.cancel()
                return request.fail(DecisionReached())
            }
            progress?.limitChanged(to: limit(), at: now)
            guard let why = progress?.check(at: now) else { return }
            repeated.cancel()
            request.fail(DownloadError.timeout(why))
        }
    }

    func sentBodyPart(_ bytes: Int, _ request: InFlightRequest) {
        // Counted at once on the request's loop (before the response's end is seen there).
        guard request.eventLoop.inEventLoop else {
            return request.eventLoop.execute { self.sentBodyPart(bytes, request) }
        }
        sentBytes += Int64(bytes)
        let now = NIODeadline.now()
        lastMoved = now
        _ = progress?.bodyPart(Int64(bytes), at: now)
        if sentBytes >= bodyLength { progress?.bodyWent(at: now) }
        sent(sentBytes)
    }

    func receivedHead(_ head: HTTPResponseHead, _ request: InFlightRequest) -> EventLoopFuture<Void> {
        marked.receivedHead(head)
        lastMoved = .now()
        // The answer came: what is left is its body, a sign of life with each part.
        progress?.bodyWent(at: lastMoved)
        status = Int(head.status.code)
        headers = head.headers
        sink = sinkFor(status)
        if headOnly {
            // Its body is not waited for (lighttpd answers OPTIONS with a chunked body it
            // never ends): the decision is in `partialResult`.
            stopWatchdog()
            request.fail(DecisionReached())
        } else if status >= 300, sentBytes < bodyLength {
            // An early answer (a refusal before the body was read, as nginx gives): AsyncHTTPClient
            // stops the body and, once the answer ended, waits for a body that can no longer go,
            // so the request would end only at the stall timeout. The answer is the outcome once
            // its body is in: at once for an empty one, at its length, or after a quiet moment
            // when it gives none (a close ends the request before that anyway).
            let length = head.headers.first(name: "content-length").flatMap { Int64($0) }
            earlyAnswerLength = length ?? -1
            if length == 0 || head.status == .notModified {
                stopWatchdog()
                request.fail(DecisionReached())
            }
        }
        return request.eventLoop.makeSucceededVoidFuture()
    }

    func receivedBodyPart(_ buffer: ByteBuffer, _ request: InFlightRequest) -> EventLoopFuture<Void> {
        lastMoved = .now()
        progress?.documentPart(at: lastMoved)
        bodyBytes += Int64(buffer.readableBytes)
        if let sink { return sink(buffer, request.eventLoop) }
        let room = UploadSpec.maxKeptReply - body.count
        if room > 0 { body += buffer.readableBytesView.prefix(room) }
        if let length = earlyAnswerLength, length >= 0, bodyBytes >= length {
            stopWatchdog()
            request.fail(DecisionReached())
        }
        return request.eventLoop.makeSucceededVoidFuture()
    }

    func receivedError() {
        stopWatchdog()
    }

    func finished() throws -> Result {
        stopWatchdog()
        guard status != 0 else { throw DownloadError.invalidResponse("the response ended before its head") }
        return Result(status: status, headers: headers, body: body, bodyBytes: bodyBytes, sent: sentBytes)
    }

    private func stopWatchdog() {
        watchdog?.cancel()
        watchdog = nil
    }
}
