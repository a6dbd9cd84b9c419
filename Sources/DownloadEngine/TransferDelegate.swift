import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Streams one HTTP response into the partial file with `pwrite` at the right offset. All
/// callbacks run on the request's event loop; the future returned for each body part is the
/// backpressure (and the bandwidth limit). Checkpoints are requested every `checkpointBytes` or
/// `checkpointInterval`; the stall watchdog fails the request when no byte arrives in time.
final class TransferDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    struct Result: Sendable {
        var decision: ResponseDecision
        var status: Int
        var headers: HTTPHeaders
        /// Where writing ended (the file holds [0, endOffset)).
        var endOffset: Int64
        var bodyBytes: Int64
    }

    struct Hooks: Sendable {
        /// The head arrived and was decided (called before any body byte is written).
        var head: @Sendable (Int, HTTPHeaders, ResponseDecision) throws -> Void
        /// Bytes were written; `position` is the end of what the file holds now.
        var wrote: @Sendable (_ count: Int64, _ position: Int64) -> Void
        /// Time for a checkpoint of everything before `position`.
        var checkpoint: @Sendable (_ position: Int64) -> Void
    }

    private let file: PartialFile
    private let requestedOffset: Int64
    private let knownLength: Int64
    private let validator: String?
    private let hooks: Hooks
    private let maxBytesPerSecond: UInt64
    private let connectTimeout: TimeAmount
    private let stallTimeout: TimeAmount
    private let checkpointBytes: Int64
    private let checkpointInterval: TimeAmount
    private let retryAfterCap: Double

    // Event-loop state.
    private var result: Result?
    private var position: Int64 = 0
    private var lastCheckpointPosition: Int64 = 0
    private var lastCheckpointTime = NIODeadline.now()
    private var lastActivity = NIODeadline.now()
    private var rateStart = NIODeadline.now()
    private var rateBytes: Int64 = 0
    private var watchdog: RepeatedTask?
    private var failed = false

    init(
        file: PartialFile, requestedOffset: Int64, knownLength: Int64, validator: String?, hooks: Hooks,
        maxBytesPerSecond: UInt64, connectTimeout: Double, stallTimeout: Double,
        checkpointBytes: Int64, checkpointInterval: Double, retryAfterCap: Double
    ) {
        self.file = file
        self.requestedOffset = requestedOffset
        self.knownLength = knownLength
        self.validator = validator
        self.hooks = hooks
        self.maxBytesPerSecond = maxBytesPerSecond
        self.connectTimeout = .milliseconds(Int64(connectTimeout * 1000))
        self.stallTimeout = .milliseconds(Int64(stallTimeout * 1000))
        self.checkpointBytes = checkpointBytes
        self.checkpointInterval = .milliseconds(Int64(checkpointInterval * 1000))
        self.retryAfterCap = retryAfterCap
    }

    func didSendRequestHead(task: HTTPClient.Task<Result>, _ head: HTTPRequestHead) {
        lastActivity = .now()
        guard watchdog == nil else { return }
        watchdog = task.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { [self] _ in
            let limit = result == nil ? connectTimeout : stallTimeout
            if NIODeadline.now() - lastActivity > limit {
                fail(task, .timeout(result == nil
                    ? "no response within \(limit.nanoseconds / 1_000_000_000) s"
                    : "no data for \(limit.nanoseconds / 1_000_000_000) s (stalled)"))
            }
        }
    }

    func didReceiveHead(task: HTTPClient.Task<Result>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        lastActivity = .now()
        let status = Int(head.status.code)
        let decision = ResponseDecision.decide(
            status: status, reason: head.status.reasonPhrase, headers: head.headers, requestedOffset: requestedOffset,
            knownLength: knownLength, validator: validator, retryAfterCap: retryAfterCap
        )
        var start: Int64 = 0
        if case .write(let offset, let truncate, _, _) = decision {
            start = offset
            if truncate {
                do {
                    try file.truncate(to: 0)
                } catch {
                    fail(task, error as? DownloadError ?? .file("\(error)"))
                    return task.eventLoop.makeSucceededVoidFuture()
                }
            }
        }
        position = start
        lastCheckpointPosition = start
        lastCheckpointTime = .now()
        rateStart = .now()
        result = Result(decision: decision, status: status, headers: head.headers, endOffset: start, bodyBytes: 0)
        do {
            try hooks.head(status, head.headers, decision)
        } catch {
            fail(task, error as? DownloadError ?? .file("\(error)"))
            return task.eventLoop.makeSucceededVoidFuture()
        }
        if case .write = decision {
            return task.eventLoop.makeSucceededVoidFuture()
        }
        // Nothing of this body is wanted: end the request now (the decision is in `result`).
        task.fail(reason: DecisionReached())
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Result>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard !failed, case .write = result?.decision else { return task.eventLoop.makeSucceededVoidFuture() }
        let count = Int64(buffer.readableBytes)
        do {
            try buffer.withUnsafeReadableBytes { try file.write($0, at: position) }
        } catch {
            fail(task, error as? DownloadError ?? .file("\(error)"))
            return task.eventLoop.makeSucceededVoidFuture()
        }
        position += count
        result?.endOffset = position
        result?.bodyBytes += count
        let now = NIODeadline.now()
        lastActivity = now
        hooks.wrote(count, position)
        if position - lastCheckpointPosition >= checkpointBytes || now - lastCheckpointTime >= checkpointInterval {
            lastCheckpointPosition = position
            lastCheckpointTime = now
            hooks.checkpoint(position)
        }
        guard maxBytesPerSecond > 0 else { return task.eventLoop.makeSucceededVoidFuture() }
        rateBytes += count
        let allowedAt = rateStart + .nanoseconds(Int64(Double(rateBytes) / Double(maxBytesPerSecond) * 1e9))
        guard allowedAt > now else { return task.eventLoop.makeSucceededVoidFuture() }
        lastActivity = allowedAt
        return task.eventLoop.scheduleTask(deadline: allowedAt) {}.futureResult
    }

    func didReceiveError(task: HTTPClient.Task<Result>, _ error: Error) {
        watchdog?.cancel()
    }

    func didFinishRequest(task: HTTPClient.Task<Result>) throws -> Result {
        watchdog?.cancel()
        guard let result else { throw DownloadError.invalidResponse("the response ended before its head") }
        return result
    }

    /// The decision or head reached so far (after a failure too).
    var partialResult: Result? { result }

    private func fail(_ task: HTTPClient.Task<Result>, _ error: DownloadError) {
        guard !failed else { return }
        failed = true
        watchdog?.cancel()
        task.fail(reason: error)
    }
}

/// Ends a request whose head was enough (redirect, 416, error status).
struct DecisionReached: Error {}
