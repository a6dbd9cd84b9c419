import DownloadModel
/// The decisions of one run of a task, from its first request to finishing, failing or stopping:
/// which request to send (range or not, with or without the caller's credentials), what a
/// response means, when to restart from zero, when to retry and after how long, when to give up,
/// and what a connection of a segmented download does after each of its ranges (`rangeEnded`:
/// the same retry policy, the same rules). A stop (pause, cancel, the network, shutdown) is an
/// input like a response: the run feeds it in before every action it takes.
/// Events in, actions out, no I/O (the shape of AsyncHTTPClient's `RequestBag+StateMachine`):
/// `TransferRun` performs the actions. Retries and restarts are counted apart: a server that
/// keeps changing the file is bounded by `maxRestarts`, a flaky network by the retry policy
/// (every retry of the run counts, as curl's `--retry` and aria2's `--max-tries` do, so a
/// transfer that keeps hitting its resource timeout ends).
struct TransferStateMachine {
    struct Request: Equatable, Sendable {
        var url: String
        /// Resume from `offset` with `If-Range: validator`; nil asks for the whole resource.
        var range: ResumeRange?
        /// Whether the caller's Authorization, Cookie and Proxy-Authorization go with it.
        var sendsCredentials: Bool
        /// The method, and whether the task's body goes with it (an upload's; a redirect may
        /// turn it into a GET without it, `RedirectRules.methodAfter`).
        var method = "GET"
        var sendsBody = false
    }

    struct ResumeRange: Equatable, Sendable {
        var offset: Int64
        var validator: String
    }

    /// What one request came to.
    enum Outcome: Equatable, Sendable {
        /// `status` decides the method of the next request (`RedirectRules.methodAfter`).
        case redirect(location: String, status: Int = 302)
        /// The response was a Metalink document, now followed: `location` (its file's first URL)
        /// is the run's URL from here on, for its retries and restarts too (a retry never fetches
        /// the document again as the file). Counted and checked as a redirect.
        case followedDocument(location: String)
        case complete
        /// A conditional request's 304: the caller's copy is current.
        case notModified
        case restartFromZero(reason: String)
        case failed(DownloadError)
        /// Failed after it moved bytes the server keeps (a resumable upload's attempt): the
        /// count of retries starts over and the next attempt goes at once (after `Retry-After`,
        /// capped), so cuts that each cost a little never add up to a give-up or to seconds of
        /// waiting.
        case failedAfterProgress(DownloadError)
    }

    enum Action: Equatable, Sendable {
        case send(Request)
        /// Wait `after` seconds (0 for the first restart of a run, then the retry policy's
        /// back-off: a server that answers every request so would otherwise be asked again at
        /// once, many times a second), truncate the partial file to zero and forget the
        /// validator, then send `then`.
        case restartFromZero(reason: String, after: Double, then: Request)
        /// Hash, publish, report finished.
        case finalize
        /// Finish with nothing written or published (a 304 to a conditional download).
        case finishUnchanged
        /// Checkpoint, report `retrying`, wait `after` seconds, then call `retryDelayElapsed`.
        case retry(after: Double, because: DownloadError)
        case fail(DownloadError)
        /// Checkpoint, close the file and leave running for the stop's state.
        case stop(DownloadTask.StopReason)
    }

    /// What one request of a segmented download's connection came to, for `rangeEnded`.
    enum RangeResult: Equatable, Sendable {
        /// The response's head was decided; `left`: what its range still lacks (nil: complete).
        case response(ResponseDecision, left: ByteRange?)
        case failed(DownloadError)
    }

    /// What the connection does next.
    enum RangeAction: Equatable, Sendable {
        /// Its range is done: claim the next one.
        case claimNext
        /// Sit out `after` seconds, then claim again (its range, or what is left).
        case retry(after: Double, because: DownloadError)
        /// Out of retries: this connection ends; the others go on (the attempt fails with
        /// `because` if none finishes the ranges).
        case giveUp(because: DownloadError)
        /// Ends every connection of the attempt, which comes to `Outcome` (restart from zero, a
        /// redirect to follow, a failure no retry helps).
        case endAttempt(Outcome)
    }

    struct Limits: Sendable {
        var retry: RetryPolicy
        var maxRedirects: Int
        var maxRestarts: Int
    }

    private enum State: Equatable {
        case idle
        case requesting(Request, redirects: Int)
        case waitingToRetry
        case ended
    }

    /// The URL every retry and restart asks again (the task's; a followed document's file).
    private(set) var originalURL: String
    /// The method every retry and restart sends again, and whether the body goes with it.
    let method: String
    let sendsBody: Bool
    /// Where the caller's credentials may go (`DownloadOptions.credentialsOrigin`): only a
    /// request to this origin carries them, whatever led there.
    let credentialsOrigin: String?
    let limits: Limits
    private var state = State.idle
    private(set) var retries = 0
    private(set) var restarts = 0

    /// `method` and `sendsBody`: an upload's (a download is a GET without one).
    init(url: String, credentialsOrigin: String? = nil, limits: Limits, method: String = "GET", sendsBody: Bool = false)
    {
        originalURL = url
        self.method = method
        self.sendsBody = sendsBody
        self.credentialsOrigin = credentialsOrigin
        self.limits = limits
    }

    /// Whether a request to `url` that nothing else forbids carries the caller's credentials.
    func credentialsGo(to url: String) -> Bool {
        credentialsOrigin.map { RedirectRules.sameOrigin(url, $0) } ?? true
    }

    /// The first request of the run; `offset` is what the partial file durably holds.
    mutating func start(offset: Int64, validator: String?) -> Action {
        guard state == .idle else { return impossible("start") }
        return firstRequest(offset: offset, validator: validator)
    }

    mutating func requestEnded(
        _ outcome: Outcome, offset: Int64, validator: String?, random: @autoclosure () -> Double
    ) -> Action {
        guard case .requesting(let request, let redirects) = state else {
            return impossible("a response")
        }
        switch outcome {
        case .complete:
            state = .ended
            return .finalize
        case .notModified:
            state = .ended
            return .finishUnchanged
        case .redirect(let location, _), .followedDocument(let location):
            guard redirects < limits.maxRedirects else { return end(.fail(.tooManyRedirects(limits.maxRedirects))) }
            let next: String
            do {
                next = try RedirectRules.checkedRedirect(from: request.url, to: location)
            } catch {
                return end(.fail(error as? DownloadError ?? .invalidResponse("\(error)")))
            }
            if case .followedDocument = outcome { originalURL = next }
            var hop = Request(
                url: next, range: request.range,
                sendsCredentials: request.sendsCredentials && RedirectRules.sameOrigin(request.url, next)
                    && credentialsGo(to: next), method: request.method, sendsBody: request.sendsBody
            )
            if case .redirect(_, let status) = outcome, let method = RedirectRules.methodAfter(status, request.method) {
                hop.method = method
                hop.sendsBody = false
            }
            state = .requesting(hop, redirects: redirects + 1)
            return .send(hop)
        case .restartFromZero(let reason):
            return restart(reason, random: random())
        case .failedAfterProgress(let error):
            guard error.isRetryable else { return end(.fail(error)) }
            retries = 0
            state = .waitingToRetry
            return .retry(after: min(error.retryAfter ?? 0, limits.retry.retryAfterCap), because: error)
        case .failed(let error):
            guard error.isRetryable else { return end(.fail(error)) }
            retries += 1
            guard let delay = limits.retry.delay(forRetry: retries, retryAfter: error.retryAfter, random: random())
            else {
                return end(.fail(error))
            }
            state = .waitingToRetry
            return .retry(after: delay, because: error)
        }
    }

    /// The wait before a retry is over: ask again from what the file durably holds.
    mutating func retryDelayElapsed(offset: Int64, validator: String?) -> Action {
        guard state == .waitingToRetry else { return impossible("the retry delay elapsed") }
        return firstRequest(offset: offset, validator: validator)
    }

    /// An event the current state cannot take: a bug of the run, never the server's. The run
    /// fails with `InternalError`, whose message names the state and the event (and is logged).
    private mutating func impossible(_ event: String) -> Action {
        // The state's name only: a request's URL may hold credentials.
        let was: String
        switch state {
        case .idle: was = "idle"
        case .requesting: was = "requesting"
        case .waitingToRetry: was = "waiting to retry"
        case .ended: was = "ended"
        }
        return end(.fail(.internalError("the transfer took an impossible step: \(event) while \(was)")))
    }

    /// A stop was asked: whatever the run was doing, it stops (checkpointed; see `Action.stop`).
    mutating func stop(_ reason: DownloadTask.StopReason) -> Action {
        end(.stop(reason))
    }

    /// A connection's request for its range ended, after `failures` failed requests in a row
    /// before it: the verdict, under `retry`, the policy of the whole download's retries.
    static func rangeEnded(
        _ result: RangeResult, failures: Int, retry: RetryPolicy, random: @autoclosure () -> Double
    ) -> RangeAction {
        let error: DownloadError
        switch result {
        case .failed(let failure):
            error = failure
        case .response(let decision, let left):
            switch decision {
            case .write:
                guard let left else { return .claimNext }
                error = .interrupted("the range ended at \(left.start), before \(left.end)")
            case .restartFromZero(let reason):
                return .endAttempt(.restartFromZero(reason: reason))
            case .alreadyComplete:
                return .endAttempt(.restartFromZero(reason: "416 for a range that is not held"))
            case .notModified:
                // Never decided for a range (only a request from the file's start is conditional).
                return .endAttempt(.restartFromZero(reason: "a 304 for a range"))
            case .metalink:
                // Never decided for a range (only a whole response from the start is followed).
                return .endAttempt(.restartFromZero(reason: "a Metalink document for a range"))
            case .redirect(let location):
                // The URL moved: a resumed download asks the URL it was given, which sends its
                // ranges elsewhere (a mirror, a CDN's signed URL). The run follows the redirect
                // under its rules, and the next attempt fetches the recorded ranges there.
                return .endAttempt(.redirect(location: location))
            case .fail(let failure):
                error = failure
            }
        }
        guard error.isRetryable else { return .endAttempt(.failed(error)) }
        guard let delay = retry.delay(forRetry: failures + 1, retryAfter: error.retryAfter, random: random()) else {
            return .giveUp(because: error)
        }
        return .retry(after: delay, because: error)
    }

    /// Finishing failed after the last byte (a checksum mismatch, a rename refused).
    mutating func finalizeFailed(_ error: DownloadError) -> Action {
        end(.fail(error))
    }

    /// The finished file failed its whole-file check holding bytes that machines of the local
    /// network served (`lan_peers`, no piece hashes to say which were wrong): it is fetched
    /// again from zero, from the URL and mirrors alone, counted as a restart.
    mutating func peersSpoiledTheFile(_ error: DownloadError) -> Action {
        guard case .ended = state else { return impossible("a peer's mismatch") }
        return restart("\(error.message), with bytes from LAN peers; fetching it again without them", random: 0.5)
    }

    private mutating func firstRequest(offset: Int64, validator: String?) -> Action {
        if offset > 0 {
            guard let validator else {
                // Without a strong validator a range could splice two versions of the file.
                return restart("no strong validator to resume with", random: 0.5)
            }
            let request = Request(
                url: originalURL, range: ResumeRange(offset: offset, validator: validator),
                sendsCredentials: credentialsGo(to: originalURL), method: method, sendsBody: sendsBody
            )
            state = .requesting(request, redirects: 0)
            return .send(request)
        }
        let request = Request(
            url: originalURL, range: nil, sendsCredentials: credentialsGo(to: originalURL), method: method,
            sendsBody: sendsBody)
        state = .requesting(request, redirects: 0)
        return .send(request)
    }

    private mutating func restart(_ reason: String, random: Double) -> Action {
        restarts += 1
        guard restarts <= limits.maxRestarts else {
            return end(.fail(.invalidResponse("gave up after \(restarts - 1) restarts from zero: \(reason)")))
        }
        let request = Request(
            url: originalURL, range: nil, sendsCredentials: credentialsGo(to: originalURL), method: method,
            sendsBody: sendsBody)
        state = .requesting(request, redirects: 0)
        let delay = restarts == 1 ? 0 : limits.retry.delay(forRetry: restarts - 1, retryAfter: nil, random: random) ?? 0
        return .restartFromZero(reason: reason, after: delay, then: request)
    }

    private mutating func end(_ action: Action) -> Action {
        state = .ended
        return action
    }
}
