import DownloadModel
import NIOSSL
import ProxyRules

/// What a request to one source goes with, resolved in this one place for each request from its
/// source and its run's context: its route (the task's proxy or the environment's, its app's
/// answer to that proxy's 407, the networks its user may not reach), its trust (pinned keys,
/// `trust_pinned_only`, a certificate its app trusted at this origin, the client certificate it
/// presents here) and its credentials (its app's answer for this origin: a Digest's
/// `Authorization` made per request). Each answer goes only to the origin it was given for, never
/// where a redirect led. A source's kind is where rules of another kind go (`Source.Kind.peer`:
/// no proxy, any certificate since the hash checks the bytes, no credentials ever).
struct SourceRules: Sendable {
    let source: Source

    // MARK: Route

    /// The user the request goes for (`--deny-network` binds every user but root).
    let user: UInt32
    /// The task's own proxy (`direct://` for none; nil: the daemon's environment decides).
    let proxy: ProxySetting?
    /// Its app's answer to a proxy's 407, given to that proxy alone.
    let proxyAnswer: AnsweredCredentials?
    /// The task's own connect timeout (nil: the service's).
    let connectTimeout: Double?

    // MARK: Trust

    /// `pinned_public_keys` (`sha256//…`) and `trust_pinned_only`.
    let pinnedPublicKeys: [String]
    let trustPinnedOnly: Bool
    /// The certificate its app trusted at this origin (`server-trust`).
    let trusted: TrustedServer?
    /// The client certificate presented here: the task's own, else its app's answer for this origin.
    let clientCertificate: ClientCertificate?

    // MARK: Credentials

    /// Its app's answer to this origin's login (`http-auth`).
    let answered: AnsweredCredentials?

    init(for source: Source, _ context: RequestContext) {
        self.source = source
        let options = context.options
        let answers = context.answers
        user = context.user
        guard source.kind != .peer else {
            // A machine of the local network, found by the file's hash: reached directly, its
            // certificate any (the hash checks the bytes), nothing of the caller's presented.
            proxy = .direct
            proxyAnswer = nil
            connectTimeout = options.connectTimeout
            pinnedPublicKeys = []
            trustPinnedOnly = false
            trusted = nil
            clientCertificate = nil
            answered = nil
            return
        }
        proxy = options.proxy
        proxyAnswer = answers.credentials
        connectTimeout = options.connectTimeout
        pinnedPublicKeys = options.pinnedPublicKeys
        trustPinnedOnly = options.trustPinnedOnly
        trusted = answers.trusted(at: source.origin)
        clientCertificate = options.clientCertificate ?? answers.certificate(at: source.origin)
        answered = answers.credentials(at: source.origin)
    }

    /// Whether any certificate is taken: a LAN peer's (self-signed, made by its daemon), whose
    /// bytes the file's hash checks.
    var trustsAnyCertificate: Bool { source.kind == .peer }

    /// Whether the server is trusted otherwise than by the system's store (pins, a certificate its
    /// app trusted): checked by a handshake of its own, on a direct connection only.
    var checksOwnTrust: Bool { !pinnedPublicKeys.isEmpty || trusted != nil }

    /// The route's proxy: the task's own or the environment's for this server, with its app's
    /// answer when that proxy asked for it.
    func proxy(in network: NetworkSettings) -> ProxySetting? {
        network.proxyEnvironment.proxy(own: proxy, scheme: source.scheme, host: source.host, port: source.port).map {
            proxyAnswer?.applied(to: $0) ?? $0
        }
    }

    /// The `Authorization` of a Digest answer for one request (`method` of `target`), made fresh
    /// for each (its nonce count); nil without one.
    func digestAuthorization(method: String, target: String) -> String? {
        answered?.digest?.authorization(method: method, uri: target)
    }
}
