import AsyncHTTPClient
import DownloadModel
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Synchronization

/// One run of a task, from the scheduler starting it to finished, failed or stopped. It owns
/// the partial file's writer (the descriptor), the `TransferStateMachine` (retry and restart
/// counts) and performs the machine's actions: HTTP requests through AsyncHTTPClient,
/// truncations, checkpoints, waits, the finaliser. It reaches whoever runs it (the manager) only
/// through `TransferRunOwner`: state changes and events go through the owner's `move` and
/// `report`, so they reach observers in order; places, clients and file access are asked of it.
final class TransferRun: RunHandle {
    let task: DownloadTask
    let owner: any TransferRunOwner
    /// What the run took of its task when it started (`RunStart`).
    let start: RunStart
    /// What the task's app answered, taken when the run started (`AppAnswers`).
    var answers: AppAnswers { start.answers }
    /// The run's requests out (a stop cancels them all), taken when it started.
    var requests: RequestsOut { start.requests }
    let writer: PartialFileWriter
    /// Checkpoints asked for during this run (logged at the end: their cost is a benchmark's figure).
    let checkpoints = Atomic<Int>(0)
    /// A segmented download's ranges and how this run fetches (see TransferRun+Segments).
    let segmentState: NIOLockedValueBox<SegmentState>

    /// `connections`: the places the scheduler granted (at most the task's `connections`;
    /// it may grant more while the run goes on, see `addConnections`).
    init(task: DownloadTask, owner: any TransferRunOwner, connections: Int = 1, start: RunStart) {
        segmentState = NIOLockedValueBox(SegmentState(connections: max(1, connections)))
        self.task = task
        self.owner = owner
        self.start = start
        let record = start.record
        writer = PartialFileWriter(
            path: record.partialPath, fileAccess: owner.fileAccess(for: task), queue: start.io,
            digest: record.options.checksum?.algorithm,
            reuse: { [task] in
                let record = task.record
                if let identity = record.partialFile { return .ifSame(identity) }
                // A task stored before identities were recorded keeps a file of its owner.
                return record.durableOffset > 0 ? .ifOwned : .never
            },
            opened: { [task, owner] identity in owner.apply(.fileOpened(identity), to: task) }
        )
    }

    var configuration: SessionManager.Configuration { owner.configuration }
    var progressInterval: UInt64 { UInt64(max(0, configuration.progressInterval) * 1e9) }
    var stopReason: DownloadTask.StopReason? { task.stopReason }

    func run() async {
        owner.apply(.running(self), to: task)
        defer {
            stopLookingForPeers()
            owner.apply(.runEnded(self), to: task)
        }
        let record = start.record
        let pacing = record.options.background ? Self.startPacing(task, owner: owner, start: start) : nil
        defer { Self.stopPacing(pacing, task, owner: owner, limit: start.limit) }
        var machine = TransferStateMachine(
            url: record.url, credentialsOrigin: record.credentialsOrigin,
            limits: .init(
                retry: configuration.retry, maxRedirects: configuration.maxRedirects,
                maxRestarts: configuration.retry.maxAttempts
            ))
        var action: TransferStateMachine.Action
        // The task waits out a back-off (`TaskChange.retrying`): the next request takes it back.
        var retrying = record.state == .retrying
        do {
            if let destination = try await publishedBeforeCrash() {
                owner.logger.info("task \(task.id): was published to \(destination) before a crash")
                return finished(
                    at: destination, length: record.expectedLength >= 0 ? record.expectedLength : record.durableOffset)
            }
            let offset = try await recover()
            // A file promised small (`expected_size`: apt's packages) is short from its start, as
            // the response's head would make it: many are fetched at once, each on a connection
            // of its own (the connection limits hold), not two a session at a time while each
            // waits a round trip for its head.
            if let promise = LengthPromise(record), promise.length - offset <= configuration.shortTransfer {
                owner.apply(.short, to: task)
            }
            action = machine.start(offset: offset, validator: task.record.validator)
        } catch {
            action = .fail(DownloadError.classify(error))
        }
        while true {
            // A stop is an input of the machine, taken before every action. It also cancelled
            // this run's Task, so a wait or request in progress has ended already.
            if let reason = stopReason { action = machine.stop(reason) }
            switch action {
            case .stop(let reason):
                return await stopped(reason)
            case .send(let request):
                if retrying, owner.apply(.resumed, to: task) == nil {
                    owner.logger.error("task \(task.id): left retrying unexpectedly; the run ends")
                    return
                }
                retrying = false
                let outcome = await attempt(request)
                let (offset, validator) = (task.position, task.record.validator)
                action = machine.requestEnded(
                    outcome, offset: offset, validator: validator, random: Double.random(in: 0..<1))
            case .restartFromZero(let reason, let delay, let request):
                owner.logger.info(
                    "task \(task.id): restarting from zero\(delay > 0 ? String(format: " in %.1f s", delay) : ""): \(reason)"
                )
                if delay > 0 {
                    await sitOut(delay)
                    // Again without the wait, once a stop had its chance at the top.
                    action = .restartFromZero(reason: reason, after: 0, then: request)
                    continue
                }
                do {
                    try await restartFromZero()
                    action = .send(request)
                } catch {
                    action = machine.finalizeFailed(DownloadError.classify(error))
                }
            case .retry(let delay, let error):
                owner.logger.info(
                    "task \(task.id): \(error); retry \(machine.retries) in \(String(format: "%.1f", delay)) s")
                await checkpoint()
                // While it waits, the task says why (`TaskChange.retrying`).
                retrying = owner.apply(.retrying(error), to: task) != nil
                guard retrying else {
                    // Only a stop may take a running task elsewhere; anything else is a bug: end the run.
                    if let reason = stopReason {
                        action = machine.stop(reason)
                        continue
                    }
                    owner.logger.error("task \(task.id): left running unexpectedly; the run ends")
                    return
                }
                await sitOut(delay)
                let record = task.record
                let (offset, validator) = (record.durableOffset, record.validator)
                owner.apply(.position(offset), to: task)
                // Its `.send` takes the task back to running, unless a stop comes first.
                action = machine.retryDelayElapsed(offset: offset, validator: validator)
            case .finalize:
                do {
                    return try await finalize()
                } catch let error as DownloadError where error.code == .checksumMismatch && givesUpPeers() {
                    action = machine.peersSpoiledTheFile(error)
                } catch {
                    action = machine.finalizeFailed(DownloadError.classify(error))
                }
            case .finishUnchanged:
                // Nothing was written: no partial file is left, and a file written in place is
                // the caller's as it was.
                try? await writer.perform { $0.close() }
                await owner.removePartialFile(of: task)
                owner.logger.info("task \(task.id): not modified since the caller's copy (304)")
                owner.apply(.notModified, to: task)
                return
            case .fail(let error):
                return await failed(error)
            }
        }
    }

    /// The engine's one back-off (`TransferRunOwner.sitOut`) for this run's task.
    @discardableResult
    func sitOut(_ delay: Double, unless ended: @Sendable () -> Bool = { false }) async -> Bool {
        await owner.sitOut(delay, task: task, unless: ended)
    }

    // MARK: One request

    /// What one request came to before it is interpreted: the response as far as it went (its
    /// decision, where its body ended), or the error it ended with.
    enum Sent {
        case response(TransferDelegate.Result)
        case failed(DownloadError)
    }

    /// An attempt on one stream (see `attempt`): one request, its body written from where the
    /// response starts. A complete one goes to the finish, whose sync reports a write error (one
    /// trip to the I/O queue less per download); any other outcome gives way to a write error
    /// first, as every request's does.
    func stream(_ request: TransferStateMachine.Request) async -> TransferStateMachine.Outcome {
        let outcome = outcome(
            of: await execute(
                url: request.url, sendsCredentials: request.sendsCredentials,
                range: request.range.map { (start: $0.offset, end: nil) }, validator: request.range?.validator,
                hooks: hooks(url: request.url), checksWrites: false
            ), url: request.url)
        if case .complete = outcome { return outcome }
        let writeFailure = try? await writer.perform { $0.writeFailure }
        if let failure = writeFailure ?? nil { return .failed(failure) }
        return outcome
    }

    /// What a single-stream request to `url` came to.
    func outcome(of sent: Sent, url: String) -> TransferStateMachine.Outcome {
        switch sent {
        case .failed(let error):
            return .failed(error)
        case .response(let result):
            switch result.decision {
            case .redirect(let location):
                return .redirect(location: location)
            case .alreadyComplete:
                return .complete
            case .notModified:
                return .notModified
            case .restartFromZero(let reason):
                return .restartFromZero(reason: reason)
            case .fail(let error):
                return .failed(error)
            case .metalink:
                return followMetalink(result, from: url)
            case .write(_, _, let expected, _):
                // A body shorter than announced is an interruption (retried, resuming).
                if let length = result.headers.first(name: "content-length").flatMap(Int64.init),
                    result.bodyBytes != length
                {
                    return .failed(.interrupted("received \(result.bodyBytes) of \(length) bytes"))
                }
                if expected >= 0, result.endOffset != expected {
                    return .failed(.interrupted("the file holds \(result.endOffset) of \(expected) bytes"))
                }
                return .complete
            }
        }
    }

    /// Sends one GET (`Range: bytes=start-[end-1]` with `If-Range: validator` when `range` is
    /// given) through `RequestSender` and streams its body through a `TransferDelegate`: into the
    /// file at the response's offset, or into `segment`'s range of a segmented download. A write
    /// error of the writer is this request's failure (`checksWrites`: waited for here; otherwise
    /// the caller's to find). To a LAN peer (`sourceKind` `.peer`) none of the task's own
    /// headers go, nor its referrer or its app's answers: only what fetches the bytes.
    func execute(
        url: String, sendsCredentials: Bool, range: (start: Int64, end: Int64?)?, validator: String?,
        hooks: TransferDelegate.Hooks, checksWrites: Bool = true, segment: TransferDelegate.Segment? = nil,
        split: (@Sendable (Int, HTTPHeaders, ResponseDecision) -> TransferDelegate.Segment?)? = nil,
        speedWindow: Double? = nil, seat: SegmentWorkers.Seat? = nil, sourceKind: Source.Kind? = nil
    ) async -> Sent {
        let record = task.record
        let toPeer = sourceKind == .peer
        let headers = RequestSender.headers(
            with: toPeer ? record.options.withoutCallersHeaders : record.options,
            answered: toPeer ? nil : answers.credentials, to: url, sendsCredentials: sendsCredentials && !toPeer,
            range: range, validator: validator)
        let httpRequest: HTTPClient.Request
        do {
            httpRequest = try HTTPClient.Request(url: url, method: .GET, headers: headers)
        } catch {
            return .failed(.invalidArgument("cannot request \(url): \(error)"))
        }
        let transfer = TransferDelegate(
            writer: writer, requestedOffset: range?.start ?? 0, knownLength: record.expectedLength,
            validator: validator, hooks: hooks,
            settings: .init(
                body: .of(record.options, configuration, speedWindow: speedWindow),
                retryAfterCap: configuration.retry.retryAfterCap,
                followsMetalink: record.options.useMetalinkHeaders && record.options.metalinkURL == nil && range == nil
                    && segment == nil,
                conditional: headers.contains(name: "If-Modified-Since") || headers.contains(name: "If-None-Match"),
                promise: LengthPromise(record)
            ),
            ranged: range != nil, segment: segment, split: split
        )
        let context = owner.requestContext(of: task, record, answers: answers, requests: requests)
        return await RequestSender(owner: owner, context: context).send(
            httpRequest, to: url, delegate: transfer, kind: segment != nil || split != nil ? .separate : .multiplexed,
            sourceKind: sourceKind, seat: seat,
            afterwards: { [writer] in
                // What was handed to the writer is on its way to the file; a write error shows here.
                guard checksWrites else { return nil }
                return (try? await writer.perform { $0.writeFailure }) ?? nil
            }
        )
    }

    func hooks(url: String) -> TransferDelegate.Hooks {
        let task = self.task
        let owner = self.owner
        return TransferDelegate.Hooks(
            head: { [writer] status, headers, decision in
                guard case .write(let offset, let truncate, let expected, let validator) = decision else { return }
                // Metalink/HTTP: mirrors and the file's digest from the head, when the task takes them.
                let options = task.record.options
                var learned: [String] = []
                var digest: Checksum?
                if options.useMetalinkHeaders {
                    learned = MetalinkHeaders.mirrors(in: headers, base: url).filter { !options.mirrors.contains($0) }
                    learned = Array(learned.prefix(max(0, DownloadOptions.maxMirrors - options.mirrors.count)))
                    digest = options.checksum == nil ? MetalinkHeaders.checksum(in: headers) : nil
                }
                // Hashed from here on, before the body's first write is queued.
                if let digest { writer.enqueue { $0.startDigest(digest.algorithm) } }
                owner.apply(
                    .responseReceived(
                        .init(
                            status: status, url: url, offset: offset, truncate: truncate, expectedLength: expected,
                            validator: validator,
                            lastModified: headers.first(name: "last-modified").flatMap(HTTPDate.seconds),
                            mirrors: learned, checksum: digest,
                            contentDisposition: headers.first(name: "content-disposition"))),
                    to: task)
                if !learned.isEmpty || digest != nil {
                    owner.logger.info(
                        "task \(task.id): the server names \(learned.count) mirror(s)\(digest.map { " and the file's \($0.algorithm.displayName)" } ?? "")"
                    )
                }
                if expected >= 0, expected - offset <= owner.configuration.shortTransfer {
                    // Off the event loop: starting what may start takes the owner's locks.
                    Task { owner.apply(.short, to: task) }
                }
            },
            wrote: { [progressInterval] position in
                owner.events.wrote(task, upTo: position, interval: progressInterval)
            },
            checkpoint: { [self] position in
                if let table = segmentState.withLockedValue({ $0.table }) {
                    queueSegmentCheckpoint(table)
                } else {
                    queueCheckpoint(position)
                }
            },
            truncated: { [self] in resetDurable(.durableBytes) },
            maxBytesPerSecond: { [self] in
                // Each connection of a segmented download takes its share of the limit (never 0,
                // which would mean none).
                let limit = start.limit.bytesPerSecond
                let connections = segmentState.withLockedValue { $0.table == nil ? 1 : $0.connections }
                return limit == 0 ? 0 : max(1, limit / UInt64(connections))
            }
        )
    }

    // MARK: Stopped and failed (the finish is in TransferRun+Durability)

    private func stopped(_ reason: DownloadTask.StopReason) async {
        await checkpoint()
        try? await writer.perform { $0.close() }
        let next = reason.stoppedState
        let removePartial = next == .cancelled
        owner.apply(.stopped(reason, keepsUnconfirmed: true), to: task)
        if removePartial { await owner.removePartialFile(of: task) }
    }

    private func failed(_ error: DownloadError) async {
        await checkpoint()
        try? await writer.perform { $0.close() }
        if error.code == .internalError {
            owner.logger.error("task \(task.id) failed on a bug of ours: \(error)")
        } else {
            owner.logger.info("task \(task.id) failed: \(error)")
        }
        // A task that never received a byte leaves nothing behind; one with bytes keeps its
        // partial file for Resume.
        if task.record.durableOffset == 0 { await owner.removePartialFile(of: task) }
        // It keeps what is durable, and resume data when it can go on (`TaskChange.failed`).
        owner.apply(.failed(error), to: task)
    }
}
