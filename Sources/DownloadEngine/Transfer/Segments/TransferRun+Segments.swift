import DownloadModel
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import TerminalOutput
import ShownText

/// One attempt at a download (`attempt`), the single stream being the case that does not
/// split: the first request learns the length, the strong validator and whether the server
/// takes ranges; when the download may use several connections (option `connections` > 1,
/// mirrors, piece hashes) its head may split what is left into ranges (the rule:
/// `ResponseDecision.rangeToSplit`; the ranges: `SegmentTable`), as aria2 does. The first
/// connection keeps the first range and the others fetch theirs with `Range: bytes=a-b` and
/// `If-Range`. A download that may not split, or whose head did not, is that first request
/// alone: one stream, its cut or failure the run's state machine's to retry. A connection whose range
/// is done takes a waiting one or half of the largest one left (work stealing). All of them
/// write into the one partial file at their offsets; one fdatasync checkpoints them all and
/// the ranges still to fetch are then recorded (`recordSegments`, see TransferRun+Durability).
///
/// A cut, stalled or failing connection retries its own range under the retry policy while
/// the others go on; when every connection has given up, the run's state machine retries the
/// whole download from the recorded ranges. A range answered with the whole resource (200), a
/// wrong `Content-Range` or another version ends every connection and restarts the download
/// from zero on one stream: never a splice of two versions.
///
/// The run starts with the connections the scheduler granted (as many as the task asked for,
/// or the places that were free); places that free up later may be granted while an attempt
/// runs (`addConnections`), each one a new connection stealing half of the largest range. A
/// download that turns out to be one stream (no ranges, no length) gives back all but one.
extension TransferRun {
    /// Connections this run may open now.
    var connectionCount: Int { segmentState.withLockedValue { $0.connections } }

    /// Whether this run's first request may split the download: the task asked for more than
    /// one connection (even if it was granted one: more may come), has mirrors, piece hashes or
    /// LAN peers to look for, and the run has not settled on one stream (after a restart from zero).
    var maySplit: Bool {
        let options = task.record.options
        return !segmentState.withLockedValue { $0.settled }
            && (options.connections > 1 || !options.mirrors.isEmpty || options.pieces != nil || peerHash != nil)
    }

    /// More places granted while the run goes on: started at once as connections of the
    /// attempt running now. Returns how many it took (none before the split, between
    /// attempts, or on one stream); the scheduler gets the rest back.
    func addConnections(_ count: Int) -> Int {
        segmentState.withLockedValue { state in
            guard let workers = state.workers, workers.add(count) else { return 0 }
            state.connections += count
            return count
        }
    }

    /// Ends `count` of this run's connections (the scheduler took their places back for users
    /// who wait): each cancels its request, its range goes back to the others. Returns how many
    /// will end (at least one connection stays).
    func shedConnections(_ count: Int) -> Int {
        let workers = segmentState.withLockedValue { $0.workers }
        // Outside the lock: retiring cancels requests, whose callbacks come back to this run.
        guard let ending = workers?.retire(count), ending > 0 else { return 0 }
        segmentState.withLockedValue { $0.connections -= ending }
        return ending
    }

    /// A connection that has nothing to fetch from (every source's server has its connections)
    /// ends and gives its place back for good: a task holds the places of the sockets it opens.
    private func placeNotNeeded() {
        segmentState.withLockedValue { $0.connections = max(1, $0.connections - 1) }
        owner.apply(.placeNotNeeded, to: task)
    }

    /// The download goes on one stream from now on: all but one place go back to the scheduler.
    private func settleOnOneStream() {
        segmentState.withLockedValue { $0.connections = 1 }
        owner.apply(.oneStream, to: task)
    }

    /// The source a connection's next request goes to (`index` nil without mirrors).
    typealias TakenSource = (url: String, index: Int?, kind: Source.Kind, proven: Bool)

    /// Pieces that failed their hash in this run and their bytes (for the log line at the end).
    var piecesFetchedAgain: (pieces: Int, bytes: Int64) {
        segmentState.withLockedValue { ($0.piecesRefetched, $0.bytesRefetched) }
    }

    /// What a segmented attempt shares between its connections.
    private struct Attempt {
        /// Set by the first connection that ends them all.
        var abort: TransferStateMachine.Outcome?
        var lastError: DownloadError?
    }

    /// One attempt: from the recorded ranges of a segmented download, or from `request` (the
    /// state machine's), whose head may split the rest; one stream when it may not or does not.
    func attempt(_ request: TransferStateMachine.Request) async -> TransferStateMachine.Outcome {
        let record = task.record
        let attempt = NIOLockedValueBox(Attempt())
        lookForPeers()
        let outcome: TransferStateMachine.Outcome
        if !segmentState.withLockedValue({ $0.settled }), let remaining = record.segments,
            let validator = record.validator,
            record.expectedLength > 0
        {
            let connections = connectionCount
            let table = makeTable(
                length: record.expectedLength, remaining: remaining, connections: connections, attempt: attempt)
            let workers = SegmentWorkers(live: connections)
            // The validator's source is the run's, from the split that recorded these ranges.
            _ = segmentState.withLockedValue { state in
                state.move(to: .split(.init(table: table, workers: workers, validatorSource: state.validatorSource)))
            }
            owner.logger.info("task \(task.id): \(remaining.count) range(s) left, \(connections) connection(s)")
            // Places that freed since the run started may join this attempt.
            owner.apply(.mayTakeMore, to: task)
            await workers.run(spawning: connections) {
                await self.fetch(
                    table, url: request.url, validator: validator, credentials: request.sendsCredentials,
                    attempt: attempt)
            }
            outcome = await ending(table, attempt)
        } else {
            outcome = await firstRequest(request, attempt: attempt)
        }
        segmentState.withLockedValue { $0.attemptEnded() }
        if case .restartFromZero = outcome {
            // From now on this run fetches on one stream, from the start.
            _ = segmentState.withLockedValue { $0.move(to: .settled) }
            settleOnOneStream()
        }
        return outcome
    }

    /// The first request of an attempt: its head decides whether to split; if it does, the
    /// other connections start and this one goes on as one of them. A download that may not
    /// split is this request alone (`stream`).
    ///
    /// In order: the phase becomes `probing` (nothing of an earlier attempt may pass for this
    /// one's); the request goes out (to the mirrors in turn when the URL fails before a body);
    /// meanwhile this waits for its head's decision (`splits`: one value, the split or none).
    /// With a split, the other connections run; without, the request's outcome is the attempt's.
    private func firstRequest(
        _ request: TransferStateMachine.Request, attempt: NIOLockedValueBox<Attempt>
    ) async -> TransferStateMachine.Outcome {
        guard maySplit else { return await stream(request) }
        _ = segmentState.withLockedValue { $0.move(to: .probing(.init())) }
        let (splits, decided) = AsyncStream<SplitMade?>.makeStream()
        let split = splitter(attempt: attempt, decided: decided)
        return await withTaskGroup(of: TransferStateMachine.Outcome?.self) { group in
            group.addTask {
                defer { decided.finish() }
                return await self.firstConnection(request, split: split, decided: decided, attempt: attempt)
            }
            var decisions = splits.makeAsyncIterator()
            if let made = await decisions.next() ?? nil {
                owner.logger.info("task \(task.id): segmented, \(made.connections) connection(s)")
                // Places that freed since the run started may join this attempt.
                owner.apply(.mayTakeMore, to: task)
                await made.workers.run(spawning: made.connections - 1) {
                    await self.fetch(
                        made.table, url: request.url, validator: made.validator, credentials: request.sendsCredentials,
                        attempt: attempt
                    )
                }
            }
            // The first connection's outcome when it did not split (nil: it went on as one of them).
            for await case let single? in group { return single }
            guard let table = segmentState.withLockedValue({ $0.table }) else {
                return .failed(.invalidResponse("no response"))
            }
            return await ending(table, attempt)
        }
    }

    /// What a head that split the download made: its ranges, the validator, the connections.
    private struct SplitMade: Sendable {
        let table: SegmentTable
        let validator: String
        let workers: SegmentWorkers
        let connections: Int
    }

    /// The split run on the event loop inside the first response's head (`TransferDelegate`):
    /// when the rule (`ResponseDecision.rangeToSplit`) splits what is left, the phase becomes
    /// `split` and the first connection fills the first range. Says what it decided once.
    private func splitter(
        attempt: NIOLockedValueBox<Attempt>, decided: AsyncStream<SplitMade?>.Continuation
    ) -> @Sendable (Int, HTTPHeaders, ResponseDecision) -> TransferDelegate.Segment? {
        let minimum = configuration.minimumSegment
        let state = segmentState
        let makeTable: @Sendable (Int64, ByteRange, Int) -> SegmentTable = { [self] length, range, pieces in
            self.makeTable(length: length, remaining: [range], connections: pieces, attempt: attempt)
        }
        return { status, headers, decision in
            guard let range = decision.rangeToSplit(status: status, headers: headers, minimumSegment: minimum),
                case .write(_, _, _, let validator?) = decision
            else {
                decided.yield(nil)
                return nil
            }
            let pieces = state.withLockedValue { $0.connections }
            let table = makeTable(range.end, range, pieces)
            guard let claim = table.claim(startingAt: range.start) else {
                decided.yield(nil)
                return nil
            }
            // The first connection counts as one of the attempt's: it goes on after its range.
            let workers = SegmentWorkers(live: pieces)
            let source = state.withLockedValue { state -> Int in
                guard case .probing(let probe) = state.phase else { return 0 }
                state.move(
                    to: .split(
                        .init(
                            table: table, firstClaim: claim.id, workers: workers,
                            validatorSource: probe.validatorSource)))
                return probe.source
            }
            decided.yield(SplitMade(table: table, validator: validator, workers: workers, connections: pieces))
            return TransferDelegate.Segment(table: table, id: claim.id, source: source)
        }
    }

    /// The first connection: the first request (to the mirrors in turn when the URL fails
    /// before a body), then, if its head split the download, the rest of its range and more
    /// ranges as one of the attempt's connections (nil), else the request's outcome.
    private func firstConnection(
        _ request: TransferStateMachine.Request,
        split: @escaping @Sendable (Int, HTTPHeaders, ResponseDecision) -> TransferDelegate.Segment?,
        decided: AsyncStream<SplitMade?>.Continuation, attempt: NIOLockedValueBox<Attempt>
    ) async -> TransferStateMachine.Outcome? {
        var sent = await execute(
            url: request.url, sendsCredentials: request.sendsCredentials,
            range: request.range.map { (start: $0.offset, end: nil) }, validator: request.range?.validator,
            hooks: hooks(url: request.url), split: split
        )
        // Only a request that split nothing goes on to the mirrors: once its head split the
        // download, this connection is one of the split's and its failure (a stop's
        // cancellation, say) is that range's. Going to the mirrors then made the phase a probe
        // again, the split's ranges were lost, and a stop recorded the bytes held in all of them
        // as one prefix: resumed, the file had a hole (`MirrorDownloadTests`, under load).
        if let failure = Self.failedBeforeBody(sent), segmentState.withLockedValue({ $0.isProbing }) {
            sent = await firstRequestToMirrors(request, failure: failure, split: split) ?? sent
        }
        // No head split it by now: none will.
        decided.finish()
        let made = segmentState.withLockedValue { state -> (SegmentTable, Int, SegmentWorkers)? in
            guard case .split(let split) = state.phase, let claim = split.firstClaim, let workers = split.workers else {
                return nil
            }
            return (split.table, claim, workers)
        }
        guard let (table, claim, workers) = made, let validator = task.record.validator else {
            // Not split: a single-stream request like any other.
            made?.2.ended()
            // A body that came whole (no ranges, no length, too small to split) will come whole
            // again: the run needs one place.
            if made == nil, case .response(let result) = sent, case .write = result.decision {
                settleOnOneStream()
            }
            return outcome(of: sent, url: request.url)
        }
        // This connection's first range ended: it carries on as one of the connections.
        table.release(claim)
        let first = verdict(on: sent, table: table, claim: claim, failures: 0)
        await fetch(
            table, url: request.url, validator: validator, credentials: request.sendsCredentials, attempt: attempt,
            first: first)
        workers.ended()
        return nil
    }

    /// The error of a request that brought no body to write (it failed, or its status was an
    /// error); nil otherwise.
    private static func failedBeforeBody(_ sent: Sent) -> DownloadError? {
        switch sent {
        case .failed(let error): return error
        case .response(let result):
            if case .fail(let error) = result.decision { return error }
            return nil
        }
    }

    /// The URL itself failed at the start of a download with mirrors or LAN peers: its first
    /// request goes to each mirror in turn, then to the peers found by then (waited for a
    /// moment, `peersSoon`) (no `If-Range`: a mirror's ETag is its own) until one answers with a
    /// body; the URL is then dropped for this run. nil when none did (the URL's failure stands).
    private func firstRequestToMirrors(
        _ request: TransferStateMachine.Request, failure: DownloadError,
        split: @escaping @Sendable (Int, HTTPHeaders, ResponseDecision) -> TransferDelegate.Segment?
    ) async -> Sent? {
        let mirrors = task.record.options.mirrors
        let peers = await peersSoon()
        guard !mirrors.isEmpty || !peers.isEmpty, !Task.isCancelled else { return nil }
        owner.logger.info(
            "task \(task.id): \(DisplayText.quoted(request.url, limit: 200)) failed (\(failure.message)); trying \(mirrors.isEmpty ? "LAN peers" : peers.isEmpty ? "its mirrors" : "its mirrors and LAN peers")"
        )
        // Dropped before a mirror's head can split the download, so no connection goes to it.
        let perServer = configuration.maxConnectionsPerHost
        segmentState.withLockedValue { state in
            var set = state.mirrors ?? MirrorSet(primary: request.url, mirrors: mirrors, perServer: perServer)
            for peer in state.peersToJoin { set.add(peer: peer.url, oneRequest: !peer.takesRanges) }
            state.peersToJoin = []
            set.drop(0, because: failure.message)
            state.mirrors = set
        }
        let candidates =
            mirrors.filter { $0 != request.url }.map { ($0, Source.Kind.mirror) } + peers.map { ($0.url, .peer) }
        for (mirror, kind) in candidates {
            guard !Task.isCancelled, stopReason == nil else { break }
            // The ranges' If-Range goes only where the validator comes from: this mirror.
            segmentState.withLockedValue { state in
                let source = state.mirrors?.sources.firstIndex { $0.url == mirror } ?? 0
                state.move(to: .probing(.init(validatorSource: Source.server(of: mirror), source: source)))
            }
            let sent = await execute(
                url: mirror,
                sendsCredentials: kind != .peer && request.sendsCredentials
                    && RedirectRules.sameOrigin(mirror, request.url),
                range: request.range.map { (start: $0.offset, end: nil) }, validator: nil, hooks: hooks(url: mirror),
                split: split, sourceKind: kind
            )
            if Self.failedBeforeBody(sent) == nil { return sent }
            if kind == .peer {
                // A peer that failed its first request is done with, as its ranges' failures are.
                segmentState.withLockedValue { state in
                    if let index = state.mirrors?.index(of: mirror) {
                        state.mirrors?.drop(index, because: "its first request failed")
                    }
                }
            }
        }
        // None answered: the URL's own failure stands, and it is a source again.
        segmentState.withLockedValue { state in
            state.mirrors?.restore(0)
            state.move(to: .probing(.init()))
        }
        return nil
    }

    /// What an attempt came to once every connection ended (and every piece check with them).
    private func ending(
        _ table: SegmentTable, _ attempt: NIOLockedValueBox<Attempt>
    ) async -> TransferStateMachine.Outcome {
        await table.settle()
        let (abort, lastError) = attempt.withLockedValue { ($0.abort, $0.lastError) }
        if let abort { return abort }
        if table.isComplete {
            owner.apply(.position(table.length), to: task)
            return .complete
        }
        if Task.isCancelled { return .failed(.cancelled) }
        return .failed(lastError ?? .interrupted("\(table.remaining.count) range(s) left"))
    }

    /// One connection: claims ranges and fetches them until none is left, it gives up, or the
    /// attempt ends. `failures` counts its consecutive failed requests; `first` is how the first
    /// connection's first range (fetched by the first request) ended.
    private func fetch(
        _ table: SegmentTable, url: String, validator: String, credentials: Bool, attempt: NIOLockedValueBox<Attempt>,
        first: TransferStateMachine.RangeAction? = nil
    ) async {
        var failures = 0
        var next = first
        let seat = segmentState.withLockedValue { $0.workers }?.seat()
        defer { if let seat { segmentState.withLockedValue { $0.workers }?.leave(seat) } }
        while true {
            // Retired by the scheduler (its place went to a user who waits): done, whatever came.
            if seat?.isRetiring == true { return }
            if let action = next {
                switch action {
                case .claimNext:
                    failures = 0
                case .retry(let delay, let error):
                    failures += 1
                    owner.logger.info("task \(task.id): a connection: \(error)")
                    attempt.withLockedValue { $0.lastError = error }
                    guard await sitOut(delay, unless: { attempt.withLockedValue { $0.abort != nil } }) else { return }
                case .giveUp(let error):
                    owner.logger.info("task \(task.id): a connection gives up: \(error)")
                    attempt.withLockedValue { $0.lastError = error }
                    return
                case .endAttempt(let outcome):
                    return end(attempt, with: outcome)
                }
            }
            guard !Task.isCancelled, attempt.withLockedValue({ $0.abort == nil }) else { return }
            let probation = table.pieceLength != nil
            guard let source = takeSource(primary: url, probation: probation) else {
                if probation, segmentState.withLockedValue({ $0.mirrors?.awaitsProof ?? false }) {
                    // The sources on probation have their one connection: wait for a piece to prove one.
                    guard await sitOut(0.1, unless: { attempt.withLockedValue { $0.abort != nil } }) else { return }
                    next = nil
                    continue
                }
                // Every source's server has its connections: this one is not needed, nor its place.
                placeNotNeeded()
                return
            }
            // With piece hashes, a source not yet proven by a matching piece gets one piece a request.
            let onePiece = table.pieceLength != nil && source.index != nil && !source.proven
            var claimed = table.claim(onePiece: onePiece)
            if claimed == nil {
                // Nothing waits now, but a piece being checked may come back to be fetched again.
                await table.settle()
                claimed = attempt.withLockedValue({ $0.abort == nil }) ? table.claim(onePiece: onePiece) : nil
            }
            guard let claim = claimed else {
                if let index = source.index { returnSource(index) }
                return
            }
            let started = NIODeadline.now()
            // A mirror of another origin gets none of the caller's credentials; its ETag is its
            // own, so it is held to the length only (the checksum checks the bytes).
            var hooks = segmentHooks(url: source.url)
            if let index = source.index {
                // Measured against the other sources at each window of a few seconds.
                let state = segmentState
                hooks.speedFloor = { speed in state.withLockedValue { $0.mirrors?.observe(index, speed: speed) ?? 0 } }
            }
            let isPrimary = source.kind == .origin
            let sent = await execute(
                url: source.url,
                sendsCredentials: credentials && source.kind != .peer
                    && (isPrimary || RedirectRules.sameOrigin(source.url, url)),
                range: (start: claim.start, end: claim.end), validator: sendsValidator(to: source) ? validator : nil,
                hooks: hooks, segment: TransferDelegate.Segment(table: table, id: claim.id, source: source.index ?? 0),
                speedWindow: source.index == nil ? nil : MirrorSet.slowAfter, seat: seat, sourceKind: source.kind
            )
            table.release(claim.id)
            if seat?.isRetiring == true {
                // Cancelled to give its place back: no verdict on the source; its range is the others'.
                if let index = source.index {
                    _ = judged(.claimNext, source: index, kind: source.kind, bytes: 0, seconds: 0)
                }
                return
            }
            // Its piece's check decides whether this source is kept (it is dropped before its next request).
            if onePiece { await table.settle() }
            let action = verdict(on: sent, table: table, claim: claim.id, failures: failures)
            next = action
            if let index = source.index {
                var bytes: Int64 = 0
                if case .response(let result) = sent { bytes = result.bodyBytes }
                let seconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
                next = judged(action, source: index, kind: source.kind, bytes: bytes, seconds: seconds)
            }
        }
    }

    /// Whether a range request to `source` carries `If-Range`: to the source the validator came
    /// from (the URL itself, unless its first request went to a mirror), never to another.
    private func sendsValidator(to source: TakenSource) -> Bool {
        guard source.kind != .peer else { return false }
        guard let from = segmentState.withLockedValue({ $0.validatorSource }) else { return source.kind == .origin }
        return Source.server(of: source.url) == from
    }

    /// The source of a connection's next request: the URL itself without mirrors (`index`
    /// nil), else the one `MirrorSet` chooses; nil when every source's server is busy.
    private func takeSource(primary url: String, probation: Bool = false) -> TakenSource? {
        let mirrors = task.record.options.mirrors
        let perServer = configuration.maxConnectionsPerHost
        return segmentState.withLockedValue { state in
            guard !mirrors.isEmpty || !state.peersToJoin.isEmpty || state.mirrors != nil else {
                return (url, nil, .origin, true)
            }
            var set = state.mirrors ?? MirrorSet(primary: url, mirrors: mirrors, perServer: perServer)
            set.follow(primary: url)
            // Peers told of since the last request join here (LAN peers, TransferRun+Peers).
            for peer in state.peersToJoin { set.add(peer: peer.url, oneRequest: !peer.takesRanges) }
            state.peersToJoin = []
            defer { state.mirrors = set }
            guard let index = set.take(probation: probation) else { return nil }
            let source = set.sources[index]
            return (source.url, index, source.kind, source.proven)
        }
    }

    /// A source taken for a request that was not sent (nothing left to claim).
    private func returnSource(_ index: Int) {
        segmentState.withLockedValue { $0.mirrors?.release(index, bytes: 0, seconds: 0) }
    }

    /// What a connection does after a request to source `index` of a download with mirrors: a
    /// mirror that failed, answered for another file or another length, or ends the attempt is
    /// dropped and the connection claims again (the range went back to the table); a mirror's
    /// redirect is followed for later requests to it; the URL itself keeps its retry policy,
    /// and is dropped only when it gives up or fails for good while other sources remain. A
    /// source far slower than the fastest is dropped too. The last source is never dropped:
    /// its own verdict stands. A peer's redirect is not followed (it is dropped), and a Passim
    /// peer is done with after its one request.
    private func judged(
        _ action: TransferStateMachine.RangeAction, source index: Int, kind: Source.Kind, bytes: Int64,
        seconds: Double
    ) -> TransferStateMachine.RangeAction {
        let isPrimary = kind == .origin
        var reason: String?
        var location: String?
        switch action {
        case .claimNext, .endAttempt(.complete), .endAttempt(.followedDocument), .endAttempt(.notModified):
            // (A document is followed only from a whole response, never from a range.)
            break
        case .retry(_, let error):
            if !isPrimary { reason = error.message }
        case .giveUp(let error):
            reason = error.message
        case .endAttempt(.redirect(let next, _)):
            if kind == .peer {
                reason = "a LAN peer's redirect is not followed"
            } else if !isPrimary {
                location = next
            }
        case .endAttempt(.restartFromZero(let why)):
            if !isPrimary { reason = why }
        case .endAttempt(.failed(let error)), .endAttempt(.failedAfterProgress(let error)):
            reason = error.message
        }
        let maxRedirects = configuration.maxRedirects
        let (result, dropped) = segmentState.withLockedValue {
            state -> (TransferStateMachine.RangeAction, [(String, String)]) in
            guard var set = state.mirrors else { return (action, []) }
            defer { state.mirrors = set }
            set.release(index, bytes: bytes, seconds: seconds)
            if kind == .peer, reason == nil, set.sources[index].oneRequest {
                reason = "a Passim peer is asked once (it answers one request per hash an hour)"
            }
            var dropped: [(String, String)] = []
            var result = action
            if set.sources[index].foundSlow, case .retry(_, let error) = action {
                reason = "far slower than the other sources (\(error.message))"
            }
            if set.sources[index].dropped != nil {
                // Dropped while this request ran (a corrupt piece, or another connection's verdict
                // on the same source): whatever this one came to, its range goes to the others
                // now. A dropped source never ends the download.
                switch action {
                case .claimNext, .endAttempt(.complete): break
                default: return (.claimNext, [])
                }
            }
            if let location {
                let url = set.sources[index].url
                if let next = try? RedirectRules.checkedRedirect(from: url, to: location),
                    set.redirect(index, to: next, limit: maxRedirects)
                {
                    result = .claimNext
                } else {
                    reason = "its redirect to \(DisplayText.quoted(location, limit: 80)) cannot be followed"
                }
            }
            if let reason, set.drop(index, because: reason) {
                dropped.append((set.sources[index].url, reason))
                result = .claimNext
            }
            for slow in set.tooSlow() where set.drop(slow, because: "far slower than the others") {
                dropped.append((set.sources[slow].url, "far slower than the others"))
            }
            return (result, dropped)
        }
        for (url, why) in dropped {
            owner.logger.info("task \(task.id): source \(DisplayText.quoted(url, limit: 200)) dropped: \(why)")
        }
        return result
    }

    /// A segmented attempt's ranges, with the task's piece hashes when they describe a file of
    /// `length` bytes; when they do not, they are not checked piece by piece here and the finish
    /// fails the download (`TransferFinalizer`: a Metalink document's hashes are promises).
    private func makeTable(
        length: Int64, remaining: [ByteRange], connections: Int, attempt: NIOLockedValueBox<Attempt>
    ) -> SegmentTable {
        var hashes = task.record.options.pieces
        if let given = hashes, !given.fits(length) {
            owner.logger.warning(
                "task \(task.id): its \(given.count) piece hashes of \(given.length) bytes do not describe a file of \(length) bytes; the download will fail at its end"
            )
            hashes = nil
        }
        return SegmentTable(
            length: length, remaining: remaining, pieces: connections, minimumSplit: configuration.minimumSegment,
            hashes: hashes, onPieceFailed: { [self] failure in pieceFailed(failure, attempt: attempt) },
            onPiecePassed: { [segmentState] sources in segmentState.withLockedValue { $0.mirrors?.proved(sources) } }
        )
    }

    /// A piece did not match its hash (reported by the table on the writer's queue; the piece is
    /// waiting to be fetched again already). The source that wrote it alone is dropped and its
    /// writes refused (its requests end at their next body part), unless it is the last one; a
    /// piece written by several is fetched again whole, from one. A piece that fails
    /// `maxPieceFailures` times ends the download: no source has it right.
    private func pieceFailed(_ failure: SegmentTable.PieceFailure, attempt: NIOLockedValueBox<Attempt>) {
        let (dropped, urls) = segmentState.withLockedValue { state -> ([Int], [String]) in
            state.piecesRefetched += 1
            state.bytesRefetched += failure.range.count
            guard var set = state.mirrors else { return ([], failure.sources.map { _ in "the URL" }) }
            defer { state.mirrors = set }
            let urls = failure.sources.compactMap { set.sources.indices.contains($0) ? set.sources[$0].url : nil }
            guard failure.sources.count == 1, let only = failure.sources.first,
                set.drop(only, because: "served a piece that does not match its hash")
            else { return ([], urls) }
            return ([only], urls)
        }
        let from =
            urls.isEmpty ? "" : " from " + urls.map { DisplayText.quoted($0, limit: 200) }.joined(separator: ", ")
        owner.logger.warning(
            "task \(task.id): piece \(failure.piece) (bytes \(failure.range.start)-\(failure.range.end - 1))\(from) does not match its hash; fetching it again"
        )
        if let table = segmentState.withLockedValue({ $0.table }), !dropped.isEmpty {
            table.refuse(dropped)
            for url in urls {
                owner.logger.info(
                    "task \(task.id): source \(DisplayText.quoted(url, limit: 200)) dropped: it served a corrupt piece")
            }
        }
        guard failure.failures >= Self.maxPieceFailures else { return }
        end(
            attempt,
            with: .failed(
                .checksumMismatch(
                    "piece \(failure.piece) (bytes \(failure.range.start)-\(failure.range.end - 1)) did not match its hash \(failure.failures) times from every source; the verified pieces are kept"
                )))
    }

    /// How many times one piece may fail its hash before the download fails.
    static let maxPieceFailures = 3

    /// The machine's verdict on one request of a connection (see `TransferStateMachine.rangeEnded`).
    private func verdict(
        on sent: Sent, table: SegmentTable, claim: Int, failures: Int
    ) -> TransferStateMachine.RangeAction {
        let result: TransferStateMachine.RangeResult
        switch sent {
        case .failed(let error):
            result = .failed(error)
        case .response(let response):
            result = .response(response.decision, left: table.range(of: claim))
        }
        return TransferStateMachine.rangeEnded(
            result, failures: failures, retry: configuration.retry, random: Double.random(in: 0..<1))
    }

    /// Ends every connection of the attempt with `outcome` (the first one to end it decides).
    private func end(_ attempt: NIOLockedValueBox<Attempt>, with outcome: TransferStateMachine.Outcome) {
        let first = attempt.withLockedValue { state -> Bool in
            guard state.abort == nil else { return false }
            state.abort = outcome
            return true
        }
        guard first else { return }
        owner.logger.info("task \(task.id): segmented download ends: \(outcome)")
        // Taken under the task's lock, cancelled after it (bookkeeping only under a lock).
        for cancel in requests.cancels { cancel() }
    }

    /// The hooks of a range's request: progress is the bytes the download holds; the head
    /// changes nothing (the first request recorded length and validator, which the decision checks).
    private func segmentHooks(url: String) -> TransferDelegate.Hooks {
        var hooks = hooks(url: url)
        hooks.head = { _, _, _ in }
        hooks.truncated = {}
        return hooks
    }

}
