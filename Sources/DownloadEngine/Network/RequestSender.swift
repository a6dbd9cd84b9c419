import AsyncHTTPClient
import Foundation
import DownloadModel
import NIOCore
import NIOHTTP1
import NIOSSL

/// Sends one request of a task, whatever the route: the headers every request carries, the
/// client lease from the owner (shared, pinned to a checked address, or through the task's
/// proxy), forward-or-tunnel through an HTTP proxy, registration with the run's requests so a
/// stop (or a connection the scheduler takes back) cancels it, and the classification of what went wrong
/// (the proxy's fault before any response, a failed certificate check explained). The response
/// itself is the delegate's (`ResponseReceiver`): this type never looks at a body.
///
/// Which connection a source gets is decided in two places only: `MirrorSet` (which source, at
/// most `maxConnectionsPerHost` connections to one server: the one per-host limit) and here
/// (which client and route). The clients' own per-host limit is the scheduler's total
/// (`maxConnections`), which the places it grants never exceed, so it never binds.
struct RequestSender: Sendable {
    let owner: any ConnectionLender
    /// Whose request it is and what it goes with (`RequestContext`): no task is read here.
    let context: RequestContext

    /// The headers of a GET with a task's `options` to `url` (its own headers, credentials only where they
    /// may go, an app's answer to a challenge only to the server that asked, no content coding,
    /// and `Range`/`If-Range` when `range` is given, else the conditional download's
    /// `If-Modified-Since`/`If-None-Match`).
    static func headers(
        with options: DownloadOptions, answered: AnsweredCredentials?, to url: String, sendsCredentials: Bool,
        range: (start: Int64, end: Int64?)?, validator: String?
    ) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for (name, value) in options.headers.sorted(by: { $0.key < $1.key }) {
            guard sendsCredentials || !RedirectRules.credentialHeaders.contains(name.lowercased()) else { continue }
            // The service's own tag (`ConnectionWatch`), never a caller's.
            guard name.lowercased() != ConnectionWatch.header else { continue }
            headers.add(name: name, value: value)
        }
        if let answered, Source(url)?.origin == answered.origin {
            for (name, value) in answered.headers.sorted(by: { $0.key < $1.key }) {
                headers.replaceOrAdd(name: name, value: value)
            }
        }
        headers.replaceOrAdd(name: "User-Agent", value: "org.example.Downloads/1")
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        // The `referrer` option, unless the app's headers name one; never an https page to a
        // plain http server (a browser's `no-referrer-when-downgrade`).
        if let referrer = options.referrer, !headers.contains(name: "Referer"),
            !(Source(referrer)?.isSecure ?? false) || (Source(url)?.isSecure ?? false)
        {
            headers.add(name: "Referer", value: referrer)
        }
        if let range {
            headers.replaceOrAdd(name: "Range", value: "bytes=\(range.start)-\(range.end.map { String($0 - 1) } ?? "")")
            if let validator { headers.replaceOrAdd(name: "If-Range", value: validator) }
        } else {
            // A conditional download asks from the file's start only: a range continues a version.
            if let since = options.ifModifiedSince {
                headers.add(name: "If-Modified-Since", value: HTTPDate.text(since))
            }
            if let tags = options.ifNoneMatch { headers.add(name: "If-None-Match", value: tags) }
        }
        return headers
    }

    /// Where a plain http request forwarded through an HTTP proxy goes (`ForwardedRequest`).
    struct Forwarding {
        var target: String
        /// The request's headers as it goes (with a Digest answer's `Authorization` for it).
        var headers: HTTPHeaders
        var proxyHost: String
        var proxyPort: Int
        var proxyAuthorization: (user: String, password: String)?
        var connectTimeout: TimeAmount
        var deadline: NIODeadline?

        /// `host[:port]`, an IPv6 address in brackets.
        static func hostHeader(_ host: String, _ port: Int) -> String {
            let name = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            return port == 80 ? name : "\(name):\(port)"
        }

        /// The absolute-form target of `url` (its fragment left out), or nil when it is not an http URL.
        static func target(of url: String) -> String? {
            guard var components = URLComponents(string: url), components.scheme?.lowercased() == "http",
                components.host != nil
            else {
                return nil
            }
            components.fragment = nil
            if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
            return components.string
        }
    }

    /// The origin-form request target of `url` (its path and query as sent), what a Digest
    /// response is computed over.
    static func requestTarget(of url: String) -> String {
        guard let components = URLComponents(string: url) else { return "/" }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        return components.percentEncodedQuery.map { path + "?" + $0 } ?? path
    }

    /// A failed certificate check, explained; a self-signed server's asks its app (`server-trust`).
    static func failure(explained why: TLSDiagnosis.Explanation) -> DownloadError {
        let error = DownloadError.tls(why.text)
        return why.selfSigned ? error.asking(.serverTrust(chain: why.chain, error: why.text)) : error
    }

    /// The TLS configuration of `request` when its source's rules trust the server in their own
    /// way (`ServerTrust`: checked on the direct connection only) or present a client certificate
    /// (`ClientIdentity`); nil: the client's own.
    private func trust(
        _ request: HTTPClient.Request, _ rules: SourceRules, through connection: HTTPClients.Lease,
        connectTimeout: Double
    ) async -> Result<TLSConfiguration?, DownloadError> {
        var configuration: TLSConfiguration?
        if rules.trustsAnyCertificate {
            var any = owner.tlsConfiguration
            any.certificateVerification = .none
            return .success(any)
        }
        if rules.checksOwnTrust {
            if let proxy = connection.proxy, proxy != .direct {
                return .failure(
                    .tls(
                        "pinned_public_keys and a trusted certificate are checked on direct connections only, and this task goes through the proxy \(proxy)"
                    ))
            }
            switch await ServerTrust.configuration(
                for: rules, base: owner.tlsConfiguration,
                host: request.host, port: request.port, address: connection.pinnedAddress,
                timeout: .milliseconds(Int64(connectTimeout * 1000)))
            {
            case .success(let trusting): configuration = trusting
            case .failure(let error): return .failure(error)
            }
        }
        guard let certificate = rules.clientCertificate else {
            return .success(configuration)
        }
        do {
            return .success(
                try ClientIdentity.configuration(configuration ?? owner.tlsConfiguration, presenting: certificate))
        } catch {
            return .failure(error)
        }
    }

    /// Whether the TLS server of `url` asks for a client certificate (`CertificateRequestProbe`),
    /// reached as the task's requests are (its checked address); nil through a proxy.
    func certificateRequest(at url: String) async -> CertificateRequestProbe.Asked? {
        guard let source = Source(url), source.isSecure else { return nil }
        let rules = SourceRules(for: source, context)
        let connectTimeout = rules.connectTimeout ?? owner.network.connectTimeout
        guard let (connection, _) = try? await lease(.multiplexed, rules, host: source.host, port: source.port)
        else { return nil }
        defer { owner.release(connection) }
        if let proxy = connection.proxy, proxy != .direct { return nil }
        return await CertificateRequestProbe.probe(
            host: source.host, port: source.port, address: connection.pinnedAddress,
            configuration: owner.tlsConfiguration, timeout: .milliseconds(Int64(connectTimeout * 1000)))
    }

    /// Reports one request as it went (`TransactionMetrics`): its phases as measured, its bytes
    /// counted for the mirror it went to, for a LAN peer as `peer:ADDRESS`, else for the task's URL.
    private func report(
        _ request: HTTPClient.Request, to url: String, kind: Source.Kind, marks: RequestMarks, fetchStart: Int64,
        lookupEnd: Int64?, address: String?, went use: ConnectionUse?, thrown: Error?
    ) {
        let failure: String =
            switch thrown {
            case nil, is DecisionReached: ""
            case let error?: DownloadError.classify(error).name
            }
        // A connection ready before this request asked (opened for another that did not take
        // it) was not waited for: its time is no phase of this request.
        let ready = use?.readyAt.flatMap { $0 >= fetchStart ? $0 : nil }
        let transaction = TransactionMetrics(
            url: Source(url)?.withoutCredentials ?? url, source: kind == .origin ? "url" : kind.rawValue,
            range: request.headers.first(name: "Range") ?? "", protocol: marks.version, status: marks.status,
            remoteAddress: use?.remoteAddress ?? address, fetchStart: fetchStart,
            lookupStart: lookupEnd.map { _ in fetchStart }, lookupEnd: lookupEnd, requestStart: marks.requestStart,
            responseStart: marks.responseStart, responseEnd: TaskMetrics.now, bytesSent: marks.bytesSent,
            bytesReceived: marks.bytesReceived, error: failure, reusedConnection: use?.reused,
            tlsVersion: use?.tlsVersion, connectStart: use?.connectStart,
            connectEnd: use?.secure == false ? ready : nil, tlsEnd: use?.secure == true ? ready : nil)
        let counted: String =
            switch kind {
            case .origin: context.taskURL
            case .mirror: url
            case .peer: "peer:" + (Source(url)?.host ?? url)
            }
        context.ended(transaction, counted)
    }

    /// `send` for any delegate: `forward` makes the request that goes through an HTTP proxy to a
    /// plain http URL (nil: tunnelled by AsyncHTTPClient, as https is). Its source is made from the
    /// request's own parsed URL (what `url` says), not parsed again.
    func exchange<Delegate: ResponseReceiver>(
        _ request: HTTPClient.Request, to url: String, delegate: Delegate, kind: HTTPClients.Kind,
        sourceKind: Source.Kind? = nil, seat: (any RequestHolder)? = nil,
        afterwards: () async -> DownloadError? = { nil }, cleanup: TimeAmount? = nil,
        within limit: TimeAmount? = nil, forward: ((Forwarding) -> any OutgoingRequest<Delegate.Response>)?
    ) async -> Result<Delegate.Response, DownloadError> {
        let sourceKind = sourceKind ?? (context.options.mirrors.contains(url) ? .mirror : .origin)
        guard let source = Source(request.url, kind: sourceKind) else {
            return .failure(.invalidArgument("cannot request \(url): it is not an http or https URL with a host"))
        }
        let rules = SourceRules(for: source, context)
        let connectTimeout = rules.connectTimeout ?? owner.network.connectTimeout
        // A cleanup request (an upload resource's DELETE after Cancel) goes although the task
        // is stopping, within its own deadline; a probe has a deadline of its own too.
        let deadline = (cleanup ?? limit ?? context.options.resourceTimeout.map { .milliseconds(Int64($0 * 1000)) })
            .map { NIODeadline.now() + $0 }
        // A pinned name's next checked address is tried at once when a connection to one is
        // refused or times out before anything was sent (Happy Eyeballs' fallback, RFC 8305).
        var refused: Set<String> = []
        while true {
            let fetchStart = TaskMetrics.now
            let connection: HTTPClients.Lease
            let untried: Int
            do {
                (connection, untried) = try await lease(
                    kind, rules, host: request.host, port: request.port, avoiding: refused)
            } catch {
                return .failure(DownloadError.classify(error))
            }
            // The service's own name lookup, when it made one (a pinned route).
            let lookupEnd = connection.pinnedAddress != nil ? TaskMetrics.now : nil
            defer { owner.release(connection) }
            guard cleanup != nil || !context.requests.isStopped else { return .failure(.cancelled) }
            let ready: HTTPClient.Request
            switch await prepared(request, to: url, rules, on: connection, connectTimeout: connectTimeout) {
            case .success(let prepared): ready = prepared
            case .failure(let error): return .failure(error)
            }
            let (outgoing, tag) = start(
                ready, to: url, on: connection, delegate: delegate, deadline: deadline,
                connectTimeout: connectTimeout, forward: forward)
            let (result, thrown) = await outcome(of: outgoing, delegate: delegate, seat: seat, kept: cleanup == nil)
            report(
                ready, to: url, kind: source.kind, marks: delegate.marks, fetchStart: fetchStart, lookupEnd: lookupEnd,
                address: connection.pinnedAddress, went: tag.flatMap(connection.watch.close) ?? outgoing.connectionUse,
                thrown: thrown)
            if let thrown, result == nil, untried > 0, cleanup != nil || !context.requests.isStopped,
                let address = nextAddress(after: thrown, to: request.host, on: connection, delegate: delegate)
            {
                refused.insert(address)
                continue
            }
            if let failure = await afterwards() { return .failure(failure) }
            if let thrown {
                return .failure(
                    await failure(
                        thrown, of: ready, to: url, on: connection, answered: delegate.partialResult != nil,
                        headSent: delegate.requestHeadSent, connectTimeout: connectTimeout))
            }
            return result.map { .success($0) } ?? .failure(.invalidResponse("no response"))
        }
    }

    /// `request` as it goes to `url` on `connection`: with the TLS configuration its source's
    /// rules make (pins, a trusted certificate, a client certificate) and a Digest answer's
    /// `Authorization` of its own.
    private func prepared(
        _ request: HTTPClient.Request, to url: String, _ rules: SourceRules, on connection: HTTPClients.Lease,
        connectTimeout: Double
    ) async -> Result<HTTPClient.Request, DownloadError> {
        var request = request
        if request.scheme == "https" {
            switch await trust(request, rules, through: connection, connectTimeout: connectTimeout) {
            case .success(let configuration): request.tlsConfiguration = configuration
            case .failure(let error): return .failure(error.met(at: url))
            }
        }
        if let digest = rules.digestAuthorization(method: request.method.rawValue, target: Self.requestTarget(of: url))
        {
            request.headers.replaceOrAdd(name: "Authorization", value: digest)
        }
        return .success(request)
    }

    /// The address `thrown` (a connection refused or timed out before anything was sent on a
    /// pinned route) gives up, so the next checked one is tried (Happy Eyeballs' fallback).
    private func nextAddress<Delegate: ResponseReceiver>(
        after thrown: Error, to host: String, on connection: HTTPClients.Lease, delegate: Delegate
    ) -> String? {
        guard delegate.partialResult == nil, !delegate.requestHeadSent, let address = connection.pinnedAddress,
            connection.proxy == nil, DownloadError.isConnectFailure(thrown)
        else { return nil }
        owner.logger.info(
            "task \(context.taskID): \(DownloadError.classify(thrown).message); trying the next address of \(host) than \(address)"
        )
        return address
    }

    /// Waits for `outgoing`: kept by the run while it is out (`kept`; a cleanup request is not),
    /// so a stop cancels it, or cancelled at once when a stop came first; a connection the
    /// scheduler takes back (`seat`, `SegmentWorkers.retire`) cancels it too. The response (the
    /// delegate's partial one when its head was enough), or what the request threw.
    private func outcome<Delegate: ResponseReceiver>(
        of outgoing: any OutgoingRequest<Delegate.Response>, delegate: Delegate, seat: (any RequestHolder)?,
        kept: Bool
    ) async -> (Delegate.Response?, Error?) {
        let cancel: @Sendable () -> Void = {
            outgoing.cancel()
            // A response that has ended waits for its delegate, which may be in a rate
            // limit's wait: AsyncHTTPClient fails the request only once that wait is over.
            delegate.interrupt(on: outgoing.eventLoop)
        }
        // A stop cancels what is kept when it sets its reason, so no request outlives it.
        if kept, !context.requests.keep(ObjectIdentifier(outgoing), cancel: cancel) { cancel() }
        seat?.holds(cancel)
        defer {
            seat?.holds(nil)
            context.requests.forget(ObjectIdentifier(outgoing))
        }
        do {
            return (try await outgoing.futureResult.get(), nil)
        } catch is DecisionReached {
            return (delegate.partialResult, nil)
        } catch {
            return (nil, error)
        }
    }

    /// Puts `request` on its way on `connection`: forwarded to an HTTP proxy for a plain http URL
    /// (as curl does, not tunnelled), else through AsyncHTTPClient, tagged so the connection it
    /// goes on tells of itself (`ConnectionWatch`: the tag is taken out of the head before it
    /// leaves the process). Returns it and its tag.
    private func start<Delegate: ResponseReceiver>(
        _ request: HTTPClient.Request, to url: String, on connection: HTTPClients.Lease, delegate: Delegate,
        deadline: NIODeadline?, connectTimeout: Double,
        forward: ((Forwarding) -> any OutgoingRequest<Delegate.Response>)?
    ) -> (any OutgoingRequest<Delegate.Response>, String?) {
        if case .http(let proxyHost, let proxyPort, let credentials)? = connection.proxy, request.scheme == "http",
            let forward, let target = Forwarding.target(of: url)
        {
            return (
                forward(
                    Forwarding(
                        target: target, headers: request.headers, proxyHost: connection.proxyAddress ?? proxyHost,
                        proxyPort: proxyPort, proxyAuthorization: credentials.map { ($0.user, $0.password) },
                        connectTimeout: .milliseconds(Int64(connectTimeout * 1000)), deadline: deadline
                    )), nil
            )
        }
        var request = request
        let tag = connection.watch.open()
        request.headers.replaceOrAdd(name: ConnectionWatch.header, value: tag)
        return (connection.client.execute(request: request, delegate: delegate, deadline: deadline), tag)
    }

    /// What `thrown` (the request's failure) is: before any response through a proxy, a failure
    /// to connect or to open the tunnel is the proxy's; a TLS failure on a direct connection is
    /// explained (a server that ended the handshake for want of a client certificate asks the app
    /// for one, as nginx's 400 does; a failed check says which check, BoringSSL saying only
    /// `CERTIFICATE_VERIFY_FAILED`).
    private func failure(
        _ thrown: Error, of request: HTTPClient.Request, to url: String, on connection: HTTPClients.Lease,
        answered: Bool, headSent: Bool, connectTimeout: Double
    ) async -> DownloadError {
        if let proxy = connection.proxy, !answered,
            let error = DownloadError.classify(thrown, through: proxy, to: request.host, headSent: headSent)
        {
            return error
        }
        let error = DownloadError.classify(thrown)
        guard error.code == .tlsError, connection.proxy == nil else { return error }
        if let alert = TLSDiagnosis.clientCertificateAlert(thrown) {
            return DownloadError.tls(
                "the server at \(request.host):\(request.port) ended the TLS handshake (\(alert)): it wants a client certificate"
            ).asking(.clientCertificate(refusedHandshake: alert)).met(at: url)
        }
        let why = await TLSDiagnosis.explain(
            host: request.host, port: request.port, address: connection.pinnedAddress,
            configuration: owner.tlsConfiguration, timeout: .milliseconds(Int64(connectTimeout * 1000)))
        return (why.map { RequestSender.failure(explained: $0) } ?? error).met(at: url)
    }
}
