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
    /// and `Range`/`If-Range` when `range` is given).
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

    /// The TLS configuration of `request` when its task trusts the server in its own way
    /// (`ServerTrust`: checked on the direct connection only) or has a client certificate
    /// (`ClientIdentity`); nil: the client's own.
    private func trust(
        _ request: HTTPClient.Request, to url: String, through connection: HTTPClients.Lease, connectTimeout: Double
    ) async -> Result<TLSConfiguration?, DownloadError> {
        let options = context.options
        let trusted = context.answers.trusted
        var configuration: TLSConfiguration?
        if !options.pinnedPublicKeys.isEmpty || trusted != nil {
            if let proxy = connection.proxy, proxy != .direct {
                return .failure(
                    .tls(
                        "pinned_public_keys and a trusted certificate are checked on direct connections only, and this task goes through the proxy \(proxy)"
                    ))
            }
            switch await ServerTrust.configuration(
                for: options, trusted: trusted, base: owner.tlsConfiguration, origin: Source(url)?.origin,
                host: request.host, port: request.port, address: connection.pinnedAddress,
                timeout: .milliseconds(Int64(connectTimeout * 1000)))
            {
            case .success(let trusting): configuration = trusting
            case .failure(let error): return .failure(error)
            }
        }
        // The app's answer goes only to the origin that asked for it, not where a redirect led.
        guard let certificate = options.clientCertificate ?? context.answers.certificate(for: url) else {
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
        let options = context.options
        let connectTimeout = options.connectTimeout ?? owner.network.connectTimeout
        guard
            let (connection, _) = try? await lease(
                .multiplexed, for: context.user, scheme: source.scheme, host: source.host, port: source.port,
                proxy: options.proxy, connectTimeout: options.connectTimeout)
        else { return nil }
        defer { owner.release(connection) }
        if let proxy = connection.proxy, proxy != .direct { return nil }
        return await CertificateRequestProbe.probe(
            host: source.host, port: source.port, address: connection.pinnedAddress,
            configuration: owner.tlsConfiguration, timeout: .milliseconds(Int64(connectTimeout * 1000)))
    }

    /// Reports one request as it went (`TransactionMetrics`): its phases as measured, its bytes
    /// counted for the mirror it went to, else for the task's URL.
    private func report(
        _ request: HTTPClient.Request, to url: String, marks: RequestMarks, fetchStart: Int64, lookupEnd: Int64?,
        address: String?, went use: ConnectionUse?, thrown: Error?
    ) {
        let mirror = context.options.mirrors.contains(url)
        let failure: String =
            switch thrown {
            case nil, is DecisionReached: ""
            case let error?: DownloadError.classify(error).name
            }
        // A connection ready before this request asked (opened for another that did not take
        // it) was not waited for: its time is no phase of this request.
        let ready = use?.readyAt.flatMap { $0 >= fetchStart ? $0 : nil }
        let transaction = TransactionMetrics(
            url: Source(url)?.withoutCredentials ?? url, source: mirror ? "mirror" : "url",
            range: request.headers.first(name: "Range") ?? "", protocol: marks.version, status: marks.status,
            remoteAddress: use?.remoteAddress ?? address, fetchStart: fetchStart,
            lookupStart: lookupEnd.map { _ in fetchStart }, lookupEnd: lookupEnd, requestStart: marks.requestStart,
            responseStart: marks.responseStart, responseEnd: TaskMetrics.now, bytesSent: marks.bytesSent,
            bytesReceived: marks.bytesReceived, error: failure, reusedConnection: use?.reused,
            tlsVersion: use?.tlsVersion, connectStart: use?.connectStart,
            connectEnd: use?.secure == false ? ready : nil, tlsEnd: use?.secure == true ? ready : nil)
        context.ended(transaction, mirror ? url : context.taskURL)
    }

    /// `send` for any delegate: `forward` makes the request that goes through an HTTP proxy to a
    /// plain http URL (nil: tunnelled by AsyncHTTPClient, as https is).
    func exchange<Delegate: ResponseReceiver>(
        _ request: HTTPClient.Request, to url: String, delegate: Delegate, kind: HTTPClients.Kind,
        seat: (any RequestHolder)? = nil, afterwards: () async -> DownloadError? = { nil }, cleanup: TimeAmount? = nil,
        within limit: TimeAmount? = nil, forward: ((Forwarding) -> any OutgoingRequest<Delegate.Response>)?
    ) async -> Result<Delegate.Response, DownloadError> {
        let options = context.options
        let connectTimeout = options.connectTimeout ?? owner.network.connectTimeout
        // A cleanup request (an upload resource's DELETE after Cancel) goes although the task
        // is stopping, within its own deadline; a probe has a deadline of its own too.
        let deadline =
            (cleanup ?? limit).map { NIODeadline.now() + $0 }
            ?? options.resourceTimeout.map { NIODeadline.now() + .milliseconds(Int64($0 * 1000)) }
        // A pinned name's next checked address is tried at once when a connection to one is
        // refused or times out before anything was sent (Happy Eyeballs' fallback, RFC 8305).
        var refused: Set<String> = []
        while true {
            let fetchStart = TaskMetrics.now
            let connection: HTTPClients.Lease
            let untried: Int
            do {
                (connection, untried) = try await lease(
                    kind, for: context.user, scheme: request.scheme, host: request.host, port: request.port,
                    proxy: options.proxy, answered: context.answers.credentials,
                    connectTimeout: options.connectTimeout,
                    avoiding: refused
                )
            } catch {
                return .failure(DownloadError.classify(error))
            }
            // The service's own name lookup, when it made one (a pinned route).
            let lookupEnd = connection.pinnedAddress != nil ? TaskMetrics.now : nil
            defer { owner.release(connection) }
            guard cleanup != nil || !context.requests.isStopped else { return .failure(.cancelled) }
            var request = request
            if request.scheme == "https" {
                switch await trust(request, to: url, through: connection, connectTimeout: connectTimeout) {
                case .success(let configuration): request.tlsConfiguration = configuration
                case .failure(let error): return .failure(error.met(at: url))
                }
            }
            // A Digest answer: an `Authorization` of its own for this request, to the server that asked.
            if let answered = context.answers.credentials, let digest = answered.digest,
                Source(url)?.origin == answered.origin
            {
                request.headers.replaceOrAdd(
                    name: "Authorization",
                    value: digest.authorization(method: request.method.rawValue, uri: Self.requestTarget(of: url)))
            }
            let (outgoing, tag) = start(
                request, to: url, on: connection, delegate: delegate, deadline: deadline,
                connectTimeout: connectTimeout, forward: forward)
            let cancel: @Sendable () -> Void = {
                outgoing.cancel()
                // A response that has ended waits for its delegate, which may be in a rate
                // limit's wait: AsyncHTTPClient fails the request only once that wait is over.
                delegate.interrupt(on: outgoing.eventLoop)
            }
            // Kept by the run, or cancelled here when a stop came first: a stop cancels what is
            // kept when it sets its reason, so no request outlives it.
            if cleanup == nil, !context.requests.keep(ObjectIdentifier(outgoing), cancel: cancel) { cancel() }
            // A connection the scheduler takes back (`SegmentWorkers.retire`) cancels its request.
            seat?.holds(cancel)
            defer { seat?.holds(nil) }
            var result: Delegate.Response?
            var thrown: Error?
            do {
                result = try await outgoing.futureResult.get()
            } catch is DecisionReached {
                result = delegate.partialResult
            } catch {
                thrown = error
            }
            context.requests.forget(ObjectIdentifier(outgoing))
            report(
                request, to: url, marks: delegate.marks, fetchStart: fetchStart, lookupEnd: lookupEnd,
                address: connection.pinnedAddress, went: tag.flatMap(connection.watch.close) ?? outgoing.connectionUse,
                thrown: thrown)
            if let thrown, result == nil, delegate.partialResult == nil, !delegate.requestHeadSent, untried > 0,
                let address = connection.pinnedAddress, connection.proxy == nil, DownloadError.isConnectFailure(thrown),
                cleanup != nil || !context.requests.isStopped
            {
                owner.logger.info(
                    "task \(context.taskID): \(DownloadError.classify(thrown).message); trying the next address of \(request.host)"
                )
                refused.insert(address)
                continue
            }
            if let failure = await afterwards() { return .failure(failure) }
            if let thrown {
                return .failure(
                    await failure(
                        thrown, of: request, to: url, on: connection, responded: result != nil,
                        answered: result != nil || delegate.partialResult != nil, headSent: delegate.requestHeadSent,
                        connectTimeout: connectTimeout))
            }
            guard let result else { return .failure(.invalidResponse("no response")) }
            return .success(result)
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
        responded: Bool, answered: Bool, headSent: Bool, connectTimeout: Double
    ) async -> DownloadError {
        if let proxy = connection.proxy, !answered,
            let error = DownloadError.classify(thrown, through: proxy, to: request.host, headSent: headSent)
        {
            return error
        }
        let error = DownloadError.classify(thrown)
        guard error.code == .tlsError, !responded, connection.proxy == nil else { return error }
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
