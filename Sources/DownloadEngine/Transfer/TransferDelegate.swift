import AsyncHTTPClient
import DownloadModel
import Metalink
import NIOCore
import NIOHTTP1

/// Streams one HTTP response into the partial file through its `PartialFileWriter`. All
/// callbacks run on the request's event loop and never block: the file is opened, truncated and
/// written on the task's I/O queue, and the future returned for each body part is the
/// backpressure (the writer's, and the bandwidth limit's). The file is opened only when the
/// response says to write, so a refused request leaves nothing behind. What the head means is
/// `ResponseDecision`'s to say; when a checkpoint is due, how long the limit holds a part back
/// and when the request is stalled or too slow, `BodyProgress`'s: this class feeds them the
/// request's events and performs their verdicts.
final class TransferDelegate: RequestEvents, @unchecked Sendable {
    typealias Response = Result

    struct Result: Sendable {
        var decision: ResponseDecision
        var status: Int
        var headers: HTTPHeaders
        /// Where writing ended (the file holds [0, endOffset) once the writer drained).
        var endOffset: Int64
        var bodyBytes: Int64
        /// The body of a Metalink document (decision `.metalink`), read into memory.
        var document: [UInt8] = []
    }

    struct Hooks: Sendable {
        /// The head arrived and was decided (called before any body byte is written).
        var head: @Sendable (Int, HTTPHeaders, ResponseDecision) throws -> Void
        /// Bytes were handed to the writer; `position` is the end of what the file will hold.
        var wrote: @Sendable (_ position: Int64) -> Void
        /// Time for a checkpoint of everything before `position`.
        var checkpoint: @Sendable (_ position: Int64) -> Void
        /// The file was emptied for a new version (called on the I/O queue, in order with checkpoints).
        var truncated: @Sendable () -> Void
        /// The bandwidth limit now (bytes per second, 0 = none).
        var maxBytesPerSecond: @Sendable () -> UInt64
        /// This request's speed over the last window (bytes per second), told at each window's
        /// end; returns a floor beside the minimum speed (a mirror far slower than the others:
        /// `MirrorSet.observe`), 0 for none.
        var speedFloor: @Sendable (_ measured: Double) -> UInt64 = { _ in 0 }
    }

    /// For a segmented download: the range of the table this response fills.
    struct Segment: Sendable {
        let table: SegmentTable
        let id: Int
        /// The source it is fetched from (`MirrorSet` index; 0 is the URL).
        var source = 0
    }

    struct Settings: Sendable {
        /// Timeouts, the minimum speed and the checkpoints' spacing.
        var body: BodyProgress.Settings
        var retryAfterCap: Double
        /// A Metalink document answered from the start is read, not written (`ResponseDecision.metalink`).
        var followsMetalink = false
        /// The request asked `If-Modified-Since`/`If-None-Match`: a 304 is `notModified`.
        var conditional = false
        /// The file's length the task was promised (`expected_size`, a Metalink `<size>`): a
        /// response of another length fails at its head (`LengthPromise`).
        var promise: LengthPromise?
    }

    private let writer: PartialFileWriter
    private let requestedOffset: Int64
    private let knownLength: Int64
    private let validator: String?
    private let hooks: Hooks
    private let retryAfterCap: Double
    private let followsMetalink: Bool
    private let conditional: Bool
    private let promise: LengthPromise?
    /// The request asked for a range (`Range: bytes=requestedOffset-…`).
    private let ranged: Bool
    /// A response with a body to write may become the first segment of a segmented download
    /// (the first request of one): asked once, after the head was decided and reported.
    private let split: (@Sendable (Int, HTTPHeaders, ResponseDecision) -> Segment?)?

    // Event-loop state.
    /// Set when this response fills a range of a segmented download.
    private var segment: Segment?
    /// Where the body of this response ends in the file (-1 unknown).
    private var responseEnd: Int64 = -1
    private var result: Result?
    /// Checkpoints, the bandwidth limit, the stall and speed checks of this response.
    private var progress: BodyProgress
    private var watchdog: RepeatedTask?
    /// The rate limit's wait before the next body part (see `interrupt`).
    private var throttle: Scheduled<Void>?
    private var failed = false
    /// Whether the request's head went out: through a proxy, only once the tunnel was open (read,
    /// like `partialResult`, after the request's future completed).
    private(set) var requestHeadSent = false
    /// For its `TransactionMetrics` (read after the request's future completed).
    private var marked = RequestMarks()
    var marks: RequestMarks {
        var marks = marked
        marks.bytesReceived = result?.bodyBytes ?? 0
        return marks
    }

    init(
        writer: PartialFileWriter, requestedOffset: Int64, knownLength: Int64, validator: String?, hooks: Hooks,
        settings: Settings, ranged: Bool, segment: Segment? = nil,
        split: (@Sendable (Int, HTTPHeaders, ResponseDecision) -> Segment?)? = nil
    ) {
        self.ranged = ranged
        self.segment = segment
        self.split = split
        self.writer = writer
        self.requestedOffset = requestedOffset
        self.knownLength = knownLength
        self.validator = validator
        self.hooks = hooks
        progress = BodyProgress(settings: settings.body, now: .now())
        self.retryAfterCap = settings.retryAfterCap
        self.followsMetalink = settings.followsMetalink
        conditional = settings.conditional
        promise = settings.promise
    }

    // MARK: The request's events (on its event loop; AsyncHTTPClient's callbacks are
    // `RequestEvents+AsyncHTTPClient`'s, a forwarded request calls these itself)

    func sentHead(_ task: InFlightRequest) {
        requestHeadSent = true
        marked.sentHead()
        progress.requestSent(at: .now())
        guard watchdog == nil else { return }
        watchdog = task.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) {
            [self] _ in
            if let why = progress.check(at: .now(), floor: hooks.speedFloor) { fail(task, .timeout(why)) }
        }
    }

    func receivedHead(_ head: HTTPResponseHead, _ task: InFlightRequest) -> EventLoopFuture<Void> {
        marked.receivedHead(head)
        let status = Int(head.status.code)
        let decision = ResponseDecision.decide(
            status: status, reason: head.status.reasonPhrase, headers: head.headers, requestedOffset: requestedOffset,
            knownLength: knownLength, validator: validator, retryAfterCap: retryAfterCap, ranged: ranged,
            segment: segment != nil, followsMetalink: followsMetalink, conditional: conditional, promise: promise
        )
        var start: Int64?
        if case .write(let offset, _, let expected, _) = decision {
            start = offset
            let length = head.headers.first(name: "content-length").flatMap { Int64($0) }
            responseEnd = length.map { offset + $0 } ?? expected
        }
        progress.headReceived(writingAt: start, limit: hooks.maxBytesPerSecond(), at: .now())
        result = Result(decision: decision, status: status, headers: head.headers, endOffset: start ?? 0, bodyBytes: 0)
        do {
            try hooks.head(status, head.headers, decision)
        } catch {
            fail(task, DownloadError.classify(error))
            return task.eventLoop.makeSucceededVoidFuture()
        }
        if case .metalink = decision { return task.eventLoop.makeSucceededVoidFuture() }
        guard case .write(_, let truncate, _, _) = decision else {
            // Nothing of this body is wanted: end the request now (the decision is in `result`).
            task.fail(DecisionReached())
            return task.eventLoop.makeSucceededVoidFuture()
        }
        // The body may be written: open (and, for a new version, empty) the file first.
        let hooks = self.hooks
        let opened = writer.perform(on: task.eventLoop) { writer in
            try writer.openIfNeeded()
            if truncate {
                try writer.truncate(to: 0)
                hooks.truncated()
            }
        }.flatMapErrorThrowing { [self] error in
            fail(task, DownloadError.classify(error))
        }
        // Split only now: the other connections' writes queue behind that open and truncation.
        if segment == nil, let split { segment = split(status, head.headers, decision) }
        return opened
    }

    func receivedBodyPart(_ buffer: ByteBuffer, _ task: InFlightRequest) -> EventLoopFuture<Void> {
        if !failed, case .metalink = result?.decision {
            progress.documentPart(at: .now())
            result?.document += buffer.readableBytesView
            result?.bodyBytes += Int64(buffer.readableBytes)
            if (result?.document.count ?? 0) > MetalinkDocument.maximumSize {
                fail(
                    task, .invalidResponse("the Metalink document is larger than \(MetalinkDocument.maximumSize) bytes")
                )
            }
            return task.eventLoop.makeSucceededVoidFuture()
        }
        guard !failed, case .write = result?.decision else { return task.eventLoop.makeSucceededVoidFuture() }
        var count = Int64(buffer.readableBytes)
        let written: EventLoopFuture<Void>
        let held: Int64
        let position = progress.position
        /// The range is complete and the response goes on into another one's: it ends once this
        /// part is counted (whoever waits for the request reads the count when it ends).
        var rangeDone = false
        if let segment {
            let handed = segment.table.write(
                segment.id, source: segment.source, buffer, writer: writer, eventLoop: task.eventLoop)
            count = handed.accepted
            written = handed.written
            held = handed.held
            rangeDone = handed.complete && (position + count < responseEnd || responseEnd < 0)
        } else {
            written = writer.write(buffer, at: position, eventLoop: task.eventLoop)
            held = position + count
        }
        let now = NIODeadline.now()
        let checkpointDue = progress.bodyPart(count, at: now)
        result?.endOffset = progress.position
        result?.bodyBytes += count
        hooks.wrote(held)
        if checkpointDue {
            hooks.checkpoint(held)
            progress.limitChanged(to: hooks.maxBytesPerSecond(), at: now)
        }
        if rangeDone {
            failed = true
            watchdog?.cancel()
            task.fail(DecisionReached())
            return written
        }
        // Most parts of a transfer under its limit need no wait: no promise, no lock.
        guard progress.throttle(count, at: now) != nil else { return written }
        let allowed = task.eventLoop.makePromise(of: Void.self)
        waitForRate(on: task.eventLoop, then: allowed)
        return written.and(allowed.futureResult).map { _ in }
    }

    /// Completes `allowed` once the rate limit lets the next body part in: in steps (see
    /// `BodyProgress.rateWaitStep`), reading the limit again at each, so a limit raised or lifted
    /// while waiting (`MaxBytesPerSecond` set to 0) applies at once rather than after a wait
    /// reckoned at the old one (at 1 byte per second, hours). A cancelled step (`interrupt`) fails it.
    private func waitForRate(on eventLoop: EventLoop, then allowed: EventLoopPromise<Void>) {
        guard let next = progress.rateWaitStep(limit: hooks.maxBytesPerSecond(), at: .now()) else {
            allowed.succeed()
            return
        }
        let step = eventLoop.scheduleTask(deadline: next) { [self] in
            waitForRate(on: eventLoop, then: allowed)
        }
        step.futureResult.whenFailure { allowed.fail($0) }
        throttle = step
    }

    /// Ends a rate limit's wait now (it fails, and so does the request): the request was
    /// cancelled. A cancel alone does not end a request whose response has fully arrived
    /// while its delegate is still waiting, and at a low limit that wait lasts hours.
    func interrupt(on eventLoop: EventLoop) {
        eventLoop.execute { self.throttle?.cancel() }
    }

    func receivedError() {
        watchdog?.cancel()
    }

    func finished() throws -> Result {
        watchdog?.cancel()
        guard let result else { throw DownloadError.invalidResponse("the response ended before its head") }
        return result
    }

    /// The decision or head reached so far (after a failure too).
    var partialResult: Result? { result }

    private func fail(_ task: InFlightRequest, _ error: DownloadError) {
        guard !failed else { return }
        failed = true
        watchdog?.cancel()
        task.fail(error)
    }
}
