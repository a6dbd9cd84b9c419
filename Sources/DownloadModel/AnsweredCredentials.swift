import ProxyRules

/// The credentials an app's answer to a challenge gave a task (`ChallengeAnswer.use`), as the
/// headers they are sent as: only to `origin` (the server that asked), with the task's own
/// headers (replacing those of the same names). Secrets: kept in memory only, never stored nor
/// put in resume data, forgotten when the task ends; a daemon that restarts asks the app again.
/// A proxy's (`proxy-auth`) are its user and password instead, given to that proxy alone (a
/// tunnel's `CONNECT` carries them; no server sees them).
public struct AnsweredCredentials: Sendable, Hashable {
    public var origin: Source.Origin
    public var headers: [String: String]
    /// The question they answered: the same one asked again means the server refused them.
    public var challenge: Challenge
    /// For `proxy-auth`: what the proxy at `origin` is given.
    public var proxy: ProxySetting.Credentials?
    /// For a `Digest` server: the user and password, an `Authorization` made for each request.
    public var digest: DigestCredentials?

    public init(
        origin: Source.Origin, headers: [String: String], challenge: Challenge,
        proxy: ProxySetting.Credentials? = nil, digest: DigestCredentials? = nil
    ) {
        self.origin = origin
        self.headers = challenge.kind == .proxyAuth ? [:] : headers
        self.challenge = challenge
        self.proxy = proxy
        self.digest = challenge.kind == .httpAuth ? digest : nil
    }

    /// `proxy` with the answered user and password when it is the proxy that asked for them.
    public func applied(to proxy: ProxySetting?) -> ProxySetting? {
        guard challenge.kind == .proxyAuth, let credentials = self.proxy, case .http(let host, let port, _)? = proxy,
            host.lowercased() == origin.host || "[\(host.lowercased())]" == origin.host, port == origin.port
        else { return proxy }
        return .http(host: host, port: port, credentials: credentials)
    }
}
