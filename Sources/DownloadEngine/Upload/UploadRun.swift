import AsyncHTTPClient
import DownloadModel
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

/// One run of an upload, the transfer run's sibling: it reaches its owner through the same
/// `TransferRunOwner` (state changes and events, client leases, file access, the back-off) and
/// sends through the same `RequestSender` (routes, proxies, cancellation, error classes). A
/// plain upload has no durable offset: every attempt sends the body from byte 0 (as URLSession
/// does with a server that offers nothing more); a resumable protocol is a different way to send
/// the same body, behind `attempt`.
///
/// Each attempt opens the file (or takes the descriptor the caller handed over), checks it is the
/// file recorded at `Upload` before it sends and again once the response came (`SourceChanged`),
/// follows redirects (307/308 with the body, 303 and a POST's 301/302 as a GET, as curl does;
/// credentials only to their origin), and keeps the final response: a 2xx finishes, 408/429/5xx
/// and network errors are retried with back-off (`Retry-After` honoured), any other status fails
/// with `HTTPError` and its reply kept for `GetReply`.
final class UploadRun: Sendable {
    let task: DownloadTask
    let owner: any TransferRunOwner
    /// What the run took of its task when it started (`RunStart`).
    let start: RunStart
    /// What the task's app answered, taken when the run started (`AppAnswers`).
    var answers: AppAnswers { start.answers }
    /// The run's requests out (a stop cancels them all), taken when it started.
    var requests: RequestsOut { start.requests }

    init(task: DownloadTask, owner: any TransferRunOwner, start: RunStart) {
        self.task = task
        self.owner = owner
        self.start = start
    }

    var stopReason: DownloadTask.StopReason? { task.stopReason }

    /// What one attempt came to.
    enum Outcome {
        case response(UploadDelegate.Result)
        case redirect(status: Int, location: String)
        case failed(DownloadError, reply: UploadDelegate.Result?)
    }

    func run() async {
        let record = start.record
        guard let spec = record.upload else {
            return await failed(.internalError("a download was given to the upload run"), reply: nil, file: nil)
        }
        let pacing = record.options.background ? TransferRun.startPacing(task, owner: owner, start: start) : nil
        defer { TransferRun.stopPacing(pacing, task, owner: owner, limit: start.limit) }
        let replyFile = spec.replyDestination.map { destination in
            ReplyFile(
                io: start.io, access: owner.fileAccess(for: task), partial: record.partialPath,
                destination: destination,
                mode: record.fileMode
            )
        }
        // A plain upload because of what this owner learnt of the URL earlier (`PlainServers`)
        // that the server refuses asks once more which protocol it speaks.
        let plainKey = spec.requestedProtocol == .auto ? PlainServers.key(record.url, for: record) : nil
        var mayAskAgain = plainKey.map { PlainServers.shared.isPlain($0) } ?? false
        if spec.requestedProtocol != .plain {
            // Resumable: it ends the task, or finds the server speaks neither protocol (auto).
            guard await runResumable(spec, reply: replyFile) else { return }
        }
        // Killed after a request that may not go twice went out whole, before its answer: the
        // answer is lost with the daemon, and the request is not sent again on its own.
        if task.record.upload?.sentWhole == true,
            let doubt = ResendRule.doubt(
                about: resendAttempt(spec, method: spec.method, sent: spec.bodyLength),
                lost: .interrupted("the service stopped"))
        {
            return await failed(doubt, reply: nil, file: replyFile)
        }
        // The same machine as a download's (`TransferStateMachine`): redirects and their rules,
        // the retries and their back-off; each attempt from the start, the URL the caller gave
        // and the method it asked for.
        var machine = uploadMachine(spec)
        var action = machine.start(offset: 0, validator: nil)
        // The server's final answer, kept for the ending (`GetReply`).
        var reply: UploadDelegate.Result?
        while true {
            if let reason = stopReason { action = machine.stop(reason) }
            let request: TransferStateMachine.Request
            switch await perform(
                action, machine: &machine, spec: spec, reply: reply, file: replyFile, resumesFrom: "from byte 0")
            {
            case .ended: return
            case .next(let next):
                action = next
                continue
            case .send(let next): request = next
            }
            reply = nil
            guard await enterRunning(reply: replyFile) else { return }
            let outcome = await attempt(
                spec, url: request.url, method: request.method, withBody: request.sendsBody,
                sendsCredentials: request.sendsCredentials, reply: replyFile
            )
            if let reason = stopReason { return await stopped(reason, reply: replyFile) }
            if case .redirect(let status, let location) = outcome {
                action = machine.requestEnded(
                    .redirect(location: location, status: status), offset: 0, validator: nil, random: 0)
                if case .send(let next) = action {
                    owner.logger.info(
                        "task \(task.id): redirected (\(status)) to \(DisplayText.quoted(next.url, limit: 200))")
                }
                continue
            }
            let error: DownloadError
            switch verdict(of: outcome, spec: spec, request: request) {
            case .finished(let result):
                reply = result
                action = machine.requestEnded(.complete, offset: 0, validator: nil, random: 0)
                continue
            case .failedForGood(let doubt, let partial):
                return await failed(doubt, reply: partial, file: replyFile)
            case .failed(let failure, let partial):
                error = failure
                reply = partial
            }
            if mayAskAgain, let plainKey, let status = reply?.status, (400...499).contains(status) {
                mayAskAgain = false
                PlainServers.shared.forget(plainKey)
                owner.logger.info(
                    "task \(task.id): the server refused the plain upload (\(status)); asking it once more which protocol it speaks"
                )
                await replyFile?.discard()
                guard await runResumable(spec, reply: replyFile) else { return }
                machine = uploadMachine(spec)
                action = machine.start(offset: 0, validator: nil)
                continue
            }
            action = machine.requestEnded(
                .failed(error), offset: 0, validator: nil, random: Double.random(in: 0..<1))
        }
    }

    /// The machine of a plain upload's attempts: the task's URL, the method the caller asked for
    /// with the body, the service's retry policy and redirect limit.
    func uploadMachine(_ spec: UploadSpec) -> TransferStateMachine {
        TransferStateMachine(
            url: start.record.url, credentialsOrigin: start.record.credentialsOrigin,
            limits: .init(
                retry: owner.configuration.retry, maxRedirects: owner.configuration.maxRedirects,
                maxRestarts: owner.configuration.retry.maxAttempts),
            method: spec.method, sendsBody: true)
    }

    /// What a plain attempt that was not a redirect came to.
    private enum Verdict {
        /// The server took the whole body and said yes.
        case finished(UploadDelegate.Result)
        /// It may not be sent again on its own (`ResendRule`): the task fails.
        case failedForGood(DownloadError, UploadDelegate.Result?)
        /// Retried when the error is (the machine decides), with the server's answer if any.
        case failed(DownloadError, UploadDelegate.Result?)
    }

    private func verdict(of outcome: Outcome, spec: UploadSpec, request: TransferStateMachine.Request) -> Verdict {
        if case .response = outcome {
            answered()
        } else if case .failed(_, let head?) = outcome, head.status >= 200 {
            answered()
        }
        switch outcome {
        case .response(let result) where (200...299).contains(result.status):
            return .finished(result)
        case .response(let result):
            return .failed(refusal(result, at: request.url), result)
        case .failed(_, let partial?) where partial.status >= 300:
            // A complete final head is the outcome, whatever the connection does next: a server
            // that refuses an upload often answers before it read the body and closes the
            // connection (nginx's 401, 413).
            return .failed(refusal(partial, at: request.url), partial)
        case .failed(let failure, let partial?) where (200...299).contains(partial.status):
            let length = request.sendsBody ? spec.bodyLength : 0
            if partial.sent >= length {
                // The server had the whole body and said yes (an HTTP/1.0 server that ends its
                // answer by closing while the client still finishes the request).
                owner.logger.info(
                    "task \(task.id): the server answered \(partial.status), then \(failure); that answer is the outcome"
                )
                return .finished(partial)
            }
            // A yes before the whole body: sent again only when it may be (RFC 9110 §9.2.2).
            let sentSoFar = ResendRule.Attempt(
                method: request.method, headers: task.record.options.headers.keys, headSent: true, bodyLength: length,
                bodySent: partial.sent)
            if let doubt = ResendRule.doubt(aboutEarlySuccess: partial.status, of: sentSoFar) {
                return .failedForGood(doubt, partial)
            }
            return .failed(failure, partial)
        case .failed(let failure, let partial):
            return .failed(failure, partial)
        case .redirect:
            return .failedForGood(.internalError("a redirect was left unfollowed"), nil)
        }
    }

    /// The attempt as `ResendRule` judges it: `spec`'s body sent by `method` up to `sent` bytes.
    func resendAttempt(_ spec: UploadSpec, method: String, sent: Int64) -> ResendRule.Attempt {
        ResendRule.Attempt(
            method: method, headers: task.record.options.headers.keys, headSent: true, bodyLength: spec.bodyLength,
            bodySent: sent)
    }

    /// A request that may not go twice went out whole: recorded before its answer can come (a
    /// checkpoint), so a restart knows. Off the event loop: the task's event order takes locks;
    /// the attempt awaits the returned task before it reports its outcome, so an answer always
    /// clears the mark after it was set (`answered`).
    func markSentWhole() -> Task<Void, Never> {
        let task = self.task, owner = self.owner
        return Task { owner.apply(.sentWhole, to: task) }
    }

    /// An answer came: what was sent is settled (it is saved with the next change).
    func answered() {
        owner.apply(.answered, to: task)
    }

    /// A retrying task goes back to running before its next attempt; false: the run ends (it
    /// was stopped, and is moved to where the stop leads).
    func enterRunning(reply: ReplyFile?) async -> Bool {
        guard task.record.state == .retrying, owner.apply(.resumed, to: task) == nil else {
            return true
        }
        if let reason = stopReason {
            await stopped(reason, reply: reply)
        } else {
            owner.logger.error("task \(task.id): left retrying unexpectedly; the run ends")
        }
        return false
    }

    /// Moves the task to retrying (saying why) and waits out `delay`; false: the run ends (it
    /// was stopped, and is moved to where the stop leads).
    func waitToRetry(after error: DownloadError, delay: Double, file: ReplyFile?) async -> Bool {
        await file?.discard()
        guard owner.apply(.retrying(error), to: task) != nil else {
            if let reason = stopReason {
                await stopped(reason, reply: file)
            } else {
                owner.logger.error("task \(task.id): left running unexpectedly; the run ends")
            }
            return false
        }
        await owner.sitOut(delay, task: task)
        return true
    }

    /// The error a final status other than 2xx is.
    /// The failure a status the upload cannot go on with is, asking the app (`Challenge`) as a
    /// download's would: a 401 with `WWW-Authenticate` (a login), a 400 or 403 of a TLS server
    /// that wants a client certificate, a 401, 403 or 410 of an expired link, from `url` (the
    /// task's URL unless given).
    func refusal(_ result: UploadDelegate.Result, at url: String? = nil) -> DownloadError {
        let failure = DownloadError.http(
            status: result.status, reason: HTTPResponseStatus(statusCode: result.status).reasonPhrase,
            retryAfter: HTTPHeaderRules.retryAfter(result.headers, cap: owner.configuration.retry.retryAfterCap)
        )
        // As a download's (`Challenge.asked`, one mapping for both).
        guard let challenge = Challenge.asked(by: result.status, headers: result.headers) else { return failure }
        return failure.asking(challenge.at(url ?? start.record.url))
    }

    // MARK: One attempt

    /// Sends the request once (the body from byte 0 when `withBody`) and waits for the response.
    func attempt(
        _ spec: UploadSpec, url: String, method: String, withBody: Bool, sendsCredentials: Bool, reply: ReplyFile?
    ) async -> Outcome {
        let record = task.record
        var source: SourceFile?
        if withBody {
            switch await openChecked(spec) {
            case .success(let opened): source = opened
            case .failure(let error): return .failed(error, reply: nil)
            }
        }
        // Progress counts what this attempt sent: a retry starts again from 0.
        owner.apply(.position(0), to: task)
        var headers = RequestSender.headers(
            with: record.options, answered: answers.credentials, to: url, sendsCredentials: sendsCredentials,
            range: nil,
            validator: nil)
        headers.remove(name: "Accept-Encoding")
        if withBody, spec.form != nil || spec.contentType != nil || !headers.contains(name: "Content-Type") {
            headers.replaceOrAdd(name: "Content-Type", value: spec.requestContentType)
        }
        var body: HTTPClient.Body?
        if let source {
            do {
                body =
                    try await UploadBody.whole(spec, from: source, run: start)
                    ?? UploadBody.make(spec, from: source, run: start, to: url)
            } catch {
                return .failed(DownloadError.classify(error), reply: nil)
            }
        }
        let sent = await exchange(
            method, url: url, headers: headers, body: body,
            startingAt: 0, reply: reply, guardsOutcome: true
        )
        // The file must be the one recorded through the whole attempt, whatever came back.
        if let source, let changed = changed(source, from: spec) { return .failed(changed, reply: nil) }
        switch sent {
        case .failed(_, let partial?) where (300...399).contains(partial.status) && partial.status != 304:
            // A server that redirects before it read the body (the stream is cancelled when its
            // answer comes first): its redirect is the answer, as a refusal's 4xx is.
            guard let location = partial.headers.first(name: "location") else { return sent }
            return .redirect(status: partial.status, location: location)
        case .failed, .redirect:
            return sent
        case .response(let result):
            if (300...399).contains(result.status), result.status != 304,
                let location = result.headers.first(name: "location")
            {
                return .redirect(status: result.status, location: location)
            }
            if withBody, (200...299).contains(result.status), result.sent < spec.bodyLength {
                // A server that answered before it read the whole body did not get the file.
                return .failed(
                    .interrupted("the server answered after \(result.sent) of \(spec.bodyLength) bytes"), reply: result)
            }
            return .response(result)
        }
    }

    /// Sends one request of the upload and waits for its response (`response` whatever its
    /// status, `failed` with what came of the response before it failed): the body's bytes
    /// count as the task's progress from `base` on; a 2xx's body goes to `reply` when there is one.
    /// `cleanup`: sent although the task is stopping, within that deadline (a `DELETE` after
    /// `Cancel`). `guardsOutcome`: a lost answer is judged by `ResendRule` (a resumable
    /// protocol's requests carry offsets that make sending them again safe, so they do not).
    /// `probe`: only the head is wanted, within that time.
    func exchange(
        _ method: String, url: String, headers: HTTPHeaders, body: HTTPClient.Body?, startingAt base: Int64,
        reply: ReplyFile?,
        cleanup: TimeAmount? = nil, guardsOutcome: Bool = false, probe: TimeAmount? = nil
    ) async -> Outcome {
        let record = task.record
        let request: HTTPClient.Request
        let waits = BodyWaits()
        defer { waits.end() }
        do {
            request = try HTTPClient.Request(
                url: url, method: HTTPMethod(rawValue: method), headers: headers, body: body.map(waits.guarding))
        } catch {
            return .failed(.invalidArgument("cannot request \(url): \(error)"), reply: nil)
        }
        let owner = self.owner
        let interval = UInt64(max(0, owner.configuration.progressInterval) * 1e9)
        // With little left to send, the upload stops counting as a transfer (as a download with
        // little left to fetch does): a thousand small files are not sent two at a time.
        let short = record.upload.map { $0.bodyLength - owner.configuration.shortTransfer } ?? 0
        // Marked once each, behind one leaf lock: little left to send, the body sent whole, and
        // the task recording the latter.
        let marks = NIOLockedValueBox((short: false, whole: false, marking: Task<Void, Never>?.none))
        // A request that may not go twice: recorded once its body went out whole.
        let bodyLength = body?.contentLength ?? 0
        let marksSentWhole =
            guardsOutcome && record.upload != nil
            && ResendRule.doubt(
                about: ResendRule.Attempt(
                    method: method, headers: headers.map(\.name), headSent: true, bodyLength: bodyLength,
                    bodySent: bodyLength), lost: .interrupted("")
            ) != nil
        let delegate = UploadDelegate(
            settings: .of(record.options, owner.configuration),
            limit: { [limit = start.limit] in limit.bytesPerSecond },
            headOnly: probe != nil,
            bodyLength: bodyLength,
            sent: { [task, self] sent in
                if marksSentWhole, sent >= bodyLength,
                    !marks.withLockedValue({ marked in
                        defer { marked.whole = true }; return marked.whole
                    })
                {
                    let mark = markSentWhole()
                    marks.withLockedValue { $0.marking = mark }
                }
                guard sent > 0 else { return }
                owner.events.wrote(task, upTo: base + sent, interval: interval)
                if base + sent >= short,
                    !marks.withLockedValue({ marked in
                        defer { marked.short = true }; return marked.short
                    })
                {
                    // Off the event loop: starting what may start takes the owner's locks.
                    Task { owner.apply(.short, to: task) }
                }
            },
            sink: { status in
                guard let reply, (200...299).contains(status) else { return nil }
                return { buffer, eventLoop in reply.append(buffer, on: eventLoop) }
            }
        )
        let context = owner.requestContext(of: task, task.record, answers: answers, requests: requests)
        let sent = await RequestSender(owner: owner, context: context).exchange(
            request, to: url, delegate: delegate, kind: .multiplexed, cleanup: cleanup, within: probe
        ) { forwarding in
            // A plain http URL through an HTTP proxy: forwarded with its body, as curl does.
            ForwardedRequest(
                target: forwarding.target, method: request.method, host: request.host, port: request.port,
                headers: forwarding.headers,
                body: request.body, proxyHost: forwarding.proxyHost, proxyPort: forwarding.proxyPort,
                proxyAuthorization: forwarding.proxyAuthorization, delegate: delegate,
                connectTimeout: forwarding.connectTimeout, deadline: forwarding.deadline
            )
        }
        // The mark of a body sent whole is in the task before its outcome is (see `markSentWhole`).
        await marks.withLockedValue { $0.marking }?.value
        switch sent {
        case .success(let result): return .response(result)
        case .failure(let error):
            let partial = delegate.partialResult
            if guardsOutcome, partial == nil, error.code != .cancelled {
                // No answer: a request the server may have acted on is not sent again on its own.
                let attempt = ResendRule.Attempt(
                    method: method, headers: headers.map(\.name), headSent: delegate.requestHeadSent,
                    bodyLength: body?.contentLength ?? 0, bodySent: delegate.bodySent)
                if let doubt = ResendRule.doubt(about: attempt, lost: error) { return .failed(doubt, reply: nil) }
            }
            return .failed(error, reply: partial)
        }
    }

    /// The file, opened and checked against what was recorded at `Upload` (an attempt's start):
    /// `FileError` when it is no longer a regular file, `SourceChanged` when it changed.
    func openChecked(_ spec: UploadSpec) async -> Result<SourceFile, DownloadError> {
        do {
            let opened = try await open(spec)
            guard let now = opened.identity else {
                return .failure(.file("\(spec.source) is no longer a regular file"))
            }
            if let why = now.change(from: spec.identity) { return .failure(.sourceChanged(spec.source, why)) }
            return .success(opened)
        } catch {
            return .failure(DownloadError.classify(error))
        }
    }

    /// `SourceChanged` when the open file is no longer the one recorded at `Upload` (an
    /// attempt's end), nil while it is.
    func changed(_ source: SourceFile, from spec: UploadSpec) -> DownloadError? {
        let why: String? = source.identity.map { $0.change(from: spec.identity) } ?? "it is no longer a regular file"
        return why.map { .sourceChanged(spec.source, $0) }
    }

    /// The file to send: the service's copy (`snapshot`), the descriptor the caller handed over,
    /// or the caller's path opened as them.
    func open(_ spec: UploadSpec) async throws -> SourceFile {
        if let snapshot = spec.snapshot {
            let fd = Glibc.open(snapshot, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else {
                throw DownloadError.file("the service's copy of \(spec.source) cannot be opened: \(errnoText())")
            }
            return SourceFile(owning: fd)
        }
        if let held = start.held { return held }
        guard spec.reopensByPath else {
            throw DownloadError.file(
                "\(spec.source) was handed over as a descriptor, which the service no longer holds (it restarted); "
                    + "upload it again, or give snapshot=true so that the service keeps a copy"
            )
        }
        let access = owner.fileAccess(for: task)
        let path = spec.source
        let fd = try await start.io.perform { try access.openForReading(path) }
        return SourceFile(owning: fd)
    }

    // MARK: The end

    func finished(_ result: UploadDelegate.Result, spec: UploadSpec, reply: ReplyFile?) async {
        do {
            try await reply?.publish()
        } catch {
            return await failed(DownloadError.classify(error), reply: result, file: reply)
        }
        if let snapshot = spec.snapshot { unlink(snapshot) }
        owner.apply(.sourceReleased, to: task)
        let length = spec.bodyLength
        owner.logger.info("task \(task.id): uploaded \(length) bytes; the server answered \(result.status)")
        owner.apply(.uploaded(result, length: length, reply: spec.replyDestination, bodyKept: reply == nil), to: task)
        forgetReplyBody()
    }

    /// The reply's body went to the observers (the store) with the ending's snapshot: the
    /// record in memory does not keep it (a thousand uploads must not hold a thousand replies).
    func forgetReplyBody() {
        owner.apply(.replyBodyDelivered, to: task)
    }

    func failed(_ error: DownloadError, reply result: UploadDelegate.Result?, file: ReplyFile?) async {
        await file?.discard()
        owner.logger.info("task \(task.id) failed: \(error)")
        owner.apply(.uploadFailed(error, result), to: task)
        forgetReplyBody()
    }

    func stopped(_ reason: DownloadTask.StopReason, reply: ReplyFile?) async {
        await reply?.discard()
        let next = reason.stoppedState
        // A plain upload keeps nothing of an attempt: it starts again from byte 0; a resumable
        // one keeps what the server confirmed.
        owner.apply(.stopped(reason, keepsUnconfirmed: false), to: task)
        if next == .cancelled { await owner.removePartialFile(of: task) }
    }
}
