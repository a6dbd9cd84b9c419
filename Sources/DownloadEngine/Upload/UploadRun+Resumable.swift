import AsyncHTTPClient
import DownloadModel
import Foundation
import NIOCore
import NIOHTTP1

/// A resumable upload (option `protocol` ietf, tus or auto): the same body as a plain upload,
/// sent so that a cut costs only what was in flight. The server is asked which protocol it
/// speaks (`OPTIONS`: tus names its versions, an IETF server its `Upload-Limit`), an upload
/// resource is made, and the bytes go from the offset the server confirms; each confirmation is
/// the task's durable offset (`BytesConfirmed`), recorded as a download's checkpoint is, so a
/// restart, a pause or new resume data goes on from there after asking the server (`HEAD`).
///
/// The IETF creation is the draft's careful one (an empty request, then the bytes by `PATCH`):
/// AsyncHTTPClient drops the `104` that carries the resource of an optimistic creation, and a
/// careful creation on a server that turns out not to speak the draft would store an empty
/// file; so `auto` asks with `OPTIONS` first, which changes nothing on any server.
extension UploadRun {
    /// How one resumable attempt ended.
    enum ResumableOutcome {
        /// `auto`: the server speaks neither protocol; send it plain.
        case plain
        case finished(UploadDelegate.Result)
        case failed(DownloadError, reply: UploadDelegate.Result?)
    }

    /// Why a step could not go on in this attempt's way.
    private enum Detour: Error {
        /// The server no longer has the upload resource (404, 410, expired): made again at the
        /// task's URL, from byte 0.
        case resourceGone
        /// The server's offset is not ours (409): asked again.
        case conflict
        case failed(DownloadError, reply: UploadDelegate.Result?)
        /// The server has every byte and answered (the final response).
        case finished(UploadDelegate.Result)
    }

    /// How long the protocol probe (`OPTIONS`) may take before the plain request goes instead.
    static let probeTime: TimeAmount = .seconds(10)

    /// Bytes an attempt must have moved for its failure to be retried at once.
    static let progressWorthAnImmediateRetry: Int64 = 64 * 1024

    /// Runs the upload resumably until the task ends (false), or finds the server speaks
    /// neither protocol (true: send it plain).
    /// The attempts go as a plain upload's do, through the same machine (`uploadMachine`): an
    /// attempt that moved bytes the server keeps starts the count over and goes again at once
    /// (`Outcome.failedAfterProgress`); one that moved nothing waits as any retry does.
    func runResumable(_ spec: UploadSpec, reply replyFile: ReplyFile?) async -> Bool {
        var machine = uploadMachine(spec)
        var action = machine.start(offset: 0, validator: nil)
        var reply: UploadDelegate.Result?
        while true {
            if let reason = stopReason { action = machine.stop(reason) }
            switch await perform(
                action, machine: &machine, spec: spec, reply: reply, file: replyFile,
                resumesFrom: "from the server's offset (\(self.task.record.durableOffset) bytes confirmed)")
            {
            case .ended: return false
            case .next(let next):
                action = next
                continue
            case .send: break
            }
            reply = nil
            guard await enterRunning(reply: replyFile) else { return false }
            let before = task.record.durableOffset
            let outcome = await resumableAttempt(spec, reply: replyFile)
            let progressed = task.position - before >= Self.progressWorthAnImmediateRetry
            if let reason = stopReason {
                await stopped(reason, reply: replyFile)
                return false
            }
            switch outcome {
            case .plain:
                owner.logger.info("task \(task.id): the server speaks neither resumable protocol; a plain upload")
                return true
            case .finished(let result):
                reply = result
                action = machine.requestEnded(.complete, offset: 0, validator: nil, random: 0)
            case .failed(let error, let partial):
                reply = partial
                action = machine.requestEnded(
                    progressed ? .failedAfterProgress(error) : .failed(error), offset: 0, validator: nil,
                    random: Double.random(in: 0..<1))
            }
        }
    }

    /// One attempt: the protocol, the resource, the offset, and the bytes from there.
    func resumableAttempt(_ spec: UploadSpec, reply: ReplyFile?) async -> ResumableOutcome {
        var state: ResumableUpload
        if let known = task.record.upload?.resumable {
            state = known
        } else {
            switch await discover(spec) {
            case .success(let found?):
                state = found
                confirm(0, state)
            case .success(nil):
                return .plain
            case .failure(let detour):
                return outcome(of: detour)
            }
        }
        // The file, once the server is known to take it resumably (a plain one opens it itself).
        let source: SourceFile
        switch await openChecked(spec) {
        case .success(let opened): source = opened
        case .failure(let error): return .failed(error, reply: nil)
        }
        let size = spec.identity.size
        if let largest = state.maxSize, size > largest {
            return .failed(
                .invalidArgument("the server takes uploads of at most \(largest) bytes; \(spec.source) has \(size)"),
                reply: nil)
        }
        var restarts = 0, conflicts = 0
        while true {
            do {
                var offset: Int64
                if let resource = state.resource, !expired(state) {
                    offset = try await serverOffset(state, resource: resource, size: size)
                } else {
                    if state.resource != nil {
                        owner.logger.info("task \(task.id): the upload resource expired; made again")
                    }
                    (state, offset) = try await create(spec, state, source: source)
                }
                confirm(offset, state)
                try await send(spec, state: &state, from: offset, source: source, reply: reply)
                return .failed(.internalError("the upload ended without a final response"), reply: nil)
            } catch let detour as Detour {
                switch detour {
                case .resourceGone:
                    restarts += 1
                    guard restarts <= 3 else {
                        return .failed(
                            .invalidResponse("the server lost the upload resource \(restarts) times in a row"),
                            reply: nil)
                    }
                    owner.logger.info(
                        "task \(task.id): the server no longer has the upload resource; made again from byte 0")
                    state.resource = nil
                    state.expires = nil
                    confirm(0, state)
                case .conflict:
                    conflicts += 1
                    guard conflicts <= 5 else {
                        return .failed(
                            .invalidResponse(
                                "the server disagreed with the upload's offset \(conflicts) times in a row (409)"),
                            reply: nil)
                    }
                    owner.logger.info("task \(task.id): the server's offset is not ours (409); asked again")
                case .failed, .finished:
                    // The file must be the one recorded through the whole attempt.
                    if let changed = changed(source, from: spec) { return .failed(changed, reply: nil) }
                    return outcome(of: detour)
                }
            } catch {
                return .failed(DownloadError.classify(error), reply: nil)
            }
        }
    }

    private func outcome(of detour: Detour) -> ResumableOutcome {
        switch detour {
        case .failed(let error, let reply): return .failed(error, reply: reply)
        case .finished(let result): return .finished(result)
        case .resourceGone, .conflict: return .failed(.internalError("a detour was left untaken"), reply: nil)
        }
    }

    private func expired(_ state: ResumableUpload) -> Bool {
        state.expires.map { $0 <= Date().timeIntervalSince1970 } ?? false
    }

    /// Records `offset` as confirmed by the server, with what is known of the resource (a
    /// checkpoint: saved, and `BytesConfirmed` changes).
    func confirm(_ offset: Int64, _ state: ResumableUpload) {
        owner.apply(.confirmed(offset, state), to: task)
    }

    // MARK: The requests

    /// The headers every request of the upload carries (its own, credentials only to their
    /// origin, no content coding).
    private func headers(to url: String) -> HTTPHeaders {
        let record = task.record
        var headers = RequestSender.headers(
            with: record.options, answered: answers.credentials, to: url,
            sendsCredentials: RedirectRules.sameOrigin(record.credentialsOrigin, url), range: nil,
            validator: nil
        )
        headers.remove(name: "Accept-Encoding")
        return headers
    }

    private func request(
        _ method: String, _ url: String, _ headers: HTTPHeaders, body: HTTPClient.Body? = nil, base: Int64 = 0,
        reply: ReplyFile? = nil
    ) async throws -> UploadDelegate.Result {
        switch await exchange(method, url: url, headers: headers, body: body, startingAt: base, reply: reply) {
        case .response(let result): return result
        case .failed(let error, let partial): throw Detour.failed(error, reply: partial)
        case .redirect: throw Detour.failed(.internalError("a redirect was left unfollowed"), reply: nil)
        }
    }

    /// A status that is neither what the step expects nor one it handles.
    private func unexpected(_ result: UploadDelegate.Result, _ what: String) -> Detour {
        if (200...299).contains(result.status) {
            return .failed(
                .invalidResponse("the server answered \(what) with \(result.status) but not as the protocol says"),
                reply: result)
        }
        return .failed(refusal(result), reply: result)
    }

    /// `OPTIONS` at the task's URL: tus, the IETF draft, or (nil) neither; `ietf` is taken as
    /// asked, without asking.
    private func discover(_ spec: UploadSpec) async -> Result<ResumableUpload?, Detour> {
        let url = start.record.url
        let version = spec.ietfVersion ?? IETFUploadRules.newest
        if spec.requestedProtocol == .ietf { return .success(ResumableUpload(kind: .ietf, version: version)) }
        let plainKey = PlainServers.key(url, for: start.record)
        if spec.requestedProtocol == .auto, let plainKey, PlainServers.shared.isPlain(plainKey) { return .success(nil) }
        var headers = headers(to: url)
        headers.replaceOrAdd(name: IETFUploadRules.versionHeader, value: String(version))
        let result: UploadDelegate.Result
        let asked = ContinuousClock.now
        switch await exchange(
            "OPTIONS", url: url, headers: headers, body: nil, startingAt: 0, reply: nil, probe: Self.probeTime)
        {
        case .response(let answer):
            result = answer
        case .failed(_, let head?):
            // The head decides; its body is not waited for.
            result = head
        case .failed(let error, nil)
        where error.code == .timeout && spec.requestedProtocol == .auto
            && ContinuousClock.now - asked >= .nanoseconds(Self.probeTime.nanoseconds):
            // A server that does not answer the question within the probe's own time gets the
            // plain request (a stall before it is a failure like any other, retried).
            owner.logger.info(
                "task \(task.id): the server did not answer OPTIONS within \(Self.probeTime.nanoseconds / 1_000_000_000) s; a plain upload"
            )
            return .success(nil)
        case .failed(let error, nil):
            return .failure(.failed(error, reply: nil))
        case .redirect:
            return .failure(.failed(.internalError("a redirect was left unfollowed"), reply: nil))
        }
        // A server that is unwell (or says wait) is asked again; one that does not do OPTIONS
        // (501, 405, 404, …) has answered: it speaks neither protocol.
        if DownloadError.transientStatuses.contains(result.status) {
            return .failure(.failed(refusal(result), reply: nil))
        }
        if let tus = TusRules.capabilities(result.headers) {
            owner.logger.info("task \(task.id): the server speaks tus 1.0.0 (checksum \(tus.checksum ?? "none"))")
            return .success(tus)
        }
        if spec.requestedProtocol == .tus {
            return .failure(
                .failed(
                    .invalidResponse(
                        "the server does not speak tus 1.0.0: its OPTIONS answered \(result.status) without Tus-Version"
                    ), reply: nil
                ))
        }
        if IETFUploadRules.spoken(result.headers) {
            owner.logger.info("task \(task.id): the server speaks the IETF resumable-upload draft")
            return .success(
                ResumableUpload(kind: .ietf, version: version, maxSize: IETFUploadRules.limit(result.headers).maxSize))
        }
        if let plainKey { PlainServers.shared.rememberPlain(plainKey) }
        return .success(nil)
    }

    /// `HEAD` of the resource: the server's offset. Throws `resourceGone` for a resource it no
    /// longer has, `finished` when it holds every byte (the final response was lost: the
    /// `HEAD`'s answer stands in).
    private func serverOffset(_ state: ResumableUpload, resource: String, size: Int64) async throws -> Int64 {
        var headers = headers(to: resource)
        switch state.kind {
        case .ietf: headers.replaceOrAdd(name: IETFUploadRules.versionHeader, value: String(state.version))
        case .tus: TusRules.mark(&headers)
        }
        let result = try await request("HEAD", resource, headers)
        switch result.status {
        case 200...299:
            guard let offset = IETFUploadRules.offset(result.headers), offset <= size else {
                throw Detour.failed(
                    .invalidResponse(
                        "the server's HEAD of the upload gave no Upload-Offset within the file's \(size) bytes"),
                    reply: nil)
            }
            // The server holds every byte (tus: all it needs; the draft: when it says so), but
            // the final response was lost: the HEAD's answer stands in.
            if offset == size, state.kind == .tus || IETFUploadRules.complete(result.headers) == true {
                confirm(offset, state)
                throw Detour.finished(result)
            }
            return offset
        case 404, 410:
            throw Detour.resourceGone
        case 403 where state.kind == .tus:
            // tusd answers 403 for an upload it no longer has.
            throw Detour.resourceGone
        default:
            throw unexpected(result, "HEAD of the upload")
        }
    }

    /// Makes the upload resource at the task's URL: returns the state with it, and the offset
    /// the server holds (tus `creation-with-upload` takes the first part with it).
    private func create(
        _ spec: UploadSpec, _ known: ResumableUpload, source: SourceFile
    ) async throws -> (ResumableUpload, Int64) {
        var state = known
        let url = start.record.url
        let size = spec.identity.size
        var headers = headers(to: url)
        var body: HTTPClient.Body?
        let method: String
        switch state.kind {
        case .ietf:
            method = spec.method
            IETFUploadRules.creation(&headers, version: state.version, length: size)
            headers.replaceOrAdd(name: "Content-Type", value: spec.requestContentType)
            body = .bytes([])
        case .tus:
            method = "POST"
            TusRules.mark(&headers)
            headers.replaceOrAdd(name: "Upload-Length", value: String(size))
            headers.replaceOrAdd(
                name: "Upload-Metadata",
                value: TusRules.metadata(
                    filename: FilePaths.name(of: spec.source), contentType: spec.contentType,
                    metadata: task.record.options.metadata
                ))
            // The whole of a small file goes with the creation (one request, as a plain upload);
            // a larger one's first part does not: a cut before the answer would lose the
            // resource with it (tus-js-client's `uploadDataDuringCreation` is off for this too).
            if state.creationWithUpload, size > 0, size <= TusRules.chunkSize {
                let part = 0..<size
                try await addPart(part, of: spec, state, source: source, to: &headers)
                body = UploadBody.make(spec, from: source, run: start, to: url, range: part)
            }
        }
        let result = try await request(method, url, headers, body: body)
        guard (200...299).contains(result.status), let location = result.headers.first(name: "location") else {
            if (200...299).contains(result.status), state.kind == .ietf {
                // A server that took the empty request as the whole upload: not one of the draft's.
                throw Detour.failed(
                    .invalidResponse(
                        "the server answered the upload's creation with \(result.status) but no upload resource (Location); it does not speak the IETF draft (use protocol plain)"
                    ), reply: result)
            }
            throw unexpected(result, "the upload's creation")
        }
        do {
            state.resource = try RedirectRules.checkedRedirect(from: url, to: location)
        } catch {
            throw Detour.failed(
                .invalidResponse("the upload resource \(location.prefix(200)) cannot be used: \(error)"), reply: nil)
        }
        switch state.kind {
        case .ietf:
            let limit = IETFUploadRules.limit(result.headers)
            if let maxSize = limit.maxSize { state.maxSize = maxSize }
            state.expires = limit.maxAge.map { Date().timeIntervalSince1970 + Double($0) }
        case .tus:
            state.expires = TusRules.expires(result.headers)
        }
        owner.logger.info("task \(task.id): upload resource made (\(state.displayName))")
        let offset = IETFUploadRules.offset(result.headers) ?? 0
        guard offset <= size else {
            throw Detour.failed(
                .invalidResponse("the server says it holds \(offset) bytes of a \(size)-byte upload"), reply: nil)
        }
        if state.kind == .tus, offset == size {
            // Everything went with the creation (or the file is empty): its answer is the reply.
            confirm(offset, state)
            throw Detour.finished(result)
        }
        return (state, offset)
    }

    /// tus: the checksum of `part` (read before it is sent) into `headers`, when the server
    /// checks them.
    private func addPart(
        _ part: Range<Int64>, of spec: UploadSpec, _ state: ResumableUpload, source: SourceFile,
        to headers: inout HTTPHeaders
    ) async throws {
        headers.replaceOrAdd(name: "Content-Type", value: TusRules.appendType)
        guard let algorithm = state.checksum else { return }
        let bytes = try await start.io.perform {
            try source.read(Int(part.upperBound - part.lowerBound), at: part.lowerBound)
        }
        guard bytes.readableBytes == Int(part.upperBound - part.lowerBound) else {
            throw DownloadError.sourceChanged(
                spec.source, "it ends before byte \(part.upperBound) of \(spec.identity.size)")
        }
        headers.replaceOrAdd(name: "Upload-Checksum", value: TusRules.checksum(algorithm, of: bytes.readableBytesView))
    }

    /// Sends the bytes from `offset` to the end; ends by throwing `finished` with the final
    /// response (or another detour).
    private func send(
        _ spec: UploadSpec, state: inout ResumableUpload, from start: Int64, source: SourceFile, reply: ReplyFile?
    ) async throws {
        guard let resource = state.resource else { throw Detour.resourceGone }
        let size = spec.identity.size
        owner.apply(.position(start), to: task)
        switch state.kind {
        case .ietf:
            // The rest in one request: the server keeps what it got of it when it is cut.
            var headers = headers(to: resource)
            IETFUploadRules.append(&headers, version: state.version, offset: start)
            let body = UploadBody.make(spec, from: source, run: self.start, to: resource, range: start..<size)
            let result = try await request("PATCH", resource, headers, body: body, base: start, reply: reply)
            let complete = IETFUploadRules.complete(result.headers)
            switch result.status {
            case 409: throw Detour.conflict
            case 404, 410: throw Detour.resourceGone
            case 200...299 where complete == false:
                // The server stopped short of the end: it says where it is.
                if let offset = IETFUploadRules.offset(result.headers), offset < size { confirm(offset, state) }
                throw Detour.conflict
            case 200...299:
                confirm(size, state)
                throw Detour.finished(result)
            default:
                if complete == true || IETFUploadRules.offset(result.headers) == size {
                    // The server has every byte and refused the whole: not sent again.
                    throw Detour.failed(refusal(result).notRetried, reply: result)
                }
                throw Detour.failed(refusal(result), reply: result)
            }
        case .tus:
            var offset = start
            var mismatches = 0
            let partSize = TusRules.partSize(for: size)
            while true {
                let part = offset..<min(size, offset + partSize)
                var headers = headers(to: resource)
                TusRules.mark(&headers)
                headers.replaceOrAdd(name: "Upload-Offset", value: String(offset))
                try await addPart(part, of: spec, state, source: source, to: &headers)
                let body = UploadBody.make(spec, from: source, run: self.start, to: resource, range: part)
                let result = try await request("PATCH", resource, headers, body: body, base: offset)
                switch result.status {
                case 200...299:
                    guard let confirmed = TusRules.offset(result.headers), confirmed > offset, confirmed <= size else {
                        throw Detour.failed(
                            .invalidResponse(
                                "the server's answer to a PATCH at \(offset) gave no Upload-Offset past it"),
                            reply: result)
                    }
                    if let expires = TusRules.expires(result.headers) { state.expires = expires }
                    offset = confirmed
                    mismatches = 0
                    confirm(offset, state)
                    if offset == size { throw Detour.finished(result) }
                case 460:
                    // The server's checksum of the part is not ours: that part again.
                    mismatches += 1
                    guard mismatches <= 3 else {
                        throw Detour.failed(
                            .checksumMismatch(
                                "the server found the checksum of the part at byte \(offset) wrong \(mismatches) times (460)"
                            ), reply: result)
                    }
                    owner.logger.info(
                        "task \(task.id): the server found the part at \(offset) damaged (460); sent again")
                case 409: throw Detour.conflict
                case 404, 410: throw Detour.resourceGone
                case 403: throw Detour.resourceGone
                default: throw unexpected(result, "a PATCH")
                }
                owner.apply(.position(offset), to: task)
            }
        }
    }

    // MARK: Cancel

    /// `DELETE` of the upload resource after `Cancel` (`terminate_on_cancel`, and tus's
    /// `termination`): the server frees what it holds. Best effort, within 10 s.
    func terminate() async {
        guard let spec = start.record.upload, spec.terminateOnCancel ?? true,
            let state = spec.resumable, state.termination, let resource = state.resource
        else { return }
        var headers = headers(to: resource)
        switch state.kind {
        case .ietf: headers.replaceOrAdd(name: IETFUploadRules.versionHeader, value: String(state.version))
        case .tus: TusRules.mark(&headers)
        }
        let outcome = await exchange(
            "DELETE", url: resource, headers: headers, body: nil, startingAt: 0, reply: nil, cleanup: .seconds(10))
        if case .response(let result) = outcome {
            owner.logger.info("task \(task.id): upload resource deleted (\(result.status))")
        } else {
            owner.logger.info("task \(task.id): the upload resource could not be deleted")
        }
    }
}
