/// A question a task meets on its way that only its app can answer (`HandleChallenge`): a server
/// that asks for credentials, a token that expired. Made by the engine from the response that
/// asked it (`DownloadError.challenge`), carried to the app by the service.
public struct Challenge: Sendable, Hashable {
    /// The kinds of question (`RegisterCompletionHandler`'s `challenges` names those an app answers).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A server's `401` with `WWW-Authenticate`.
        case httpAuth = "http-auth"
        /// A proxy's `407` with `Proxy-Authenticate`.
        case proxyAuth = "proxy-auth"
        /// A TLS server that asks for a client certificate.
        case clientCertificate = "client-certificate"
        /// A TLS server the system's store does not trust.
        case serverTrust = "server-trust"
        /// A 401, 403 or 410 for a link that worked (a signed URL that expired).
        case linkExpired = "link-expired"
    }

    public var kind: Kind
    /// The authentication scheme the server named (`Basic`, `Digest`, `Bearer`, …), as it wrote it.
    public var scheme: String
    /// The realm the server named ("" when none).
    public var realm: String
    /// The status that asked (401, 407).
    public var status: Int
    /// The URL that was asked, without credentials; its host and port ("" and 0 until the run
    /// that met it says where, `at(_:)`).
    public var url = ""
    public var host = ""
    public var port = 0
    /// For `server-trust`: the chain the server presented (DER, its own certificate first) and
    /// why this system refused it.
    public var certificates: [[UInt8]] = []
    public var error = ""
    /// For `client-certificate`: the DER names of the CAs the server takes (empty: it named none).
    public var issuers: [[UInt8]] = []
    /// The challenge's auth-params, names lower-cased (a Digest's `nonce`, `opaque`, `qop`,
    /// `algorithm`): what an answer is computed with, not part of the question.
    public var parameters: [String: String] = [:]

    public init(kind: Kind, scheme: String, realm: String, status: Int) {
        self.kind = kind
        self.scheme = scheme
        self.realm = realm
        self.status = status
    }

    /// The same question, met at `url` (its user and password left out).
    public func at(_ url: String) -> Challenge {
        var copy = self
        guard let source = Source(url) else { return copy }
        copy.host = source.host
        copy.port = source.port
        copy.url = source.withoutCredentials
        return copy
    }

    /// A TLS server this system does not trust (its chain as it sent it, and why).
    public static func serverTrust(chain: [[UInt8]], error: String) -> Challenge {
        var challenge = Challenge(kind: .serverTrust, scheme: "", realm: "", status: 0)
        challenge.certificates = chain
        challenge.error = error
        return challenge
    }

    /// A TLS server that ended the handshake for want of a client certificate (Apache's
    /// `SSLVerifyClient require`, Go's `RequireAndVerifyClientCert`, Python's `CERT_REQUIRED`): TLS
    /// 1.3's `certificate_required` alert says so outright (`error` names it); a
    /// `handshake_failure` does only after the server asked for one, which the engine's probe checks.
    public static func clientCertificate(refusedHandshake alert: String) -> Challenge {
        var challenge = Challenge(kind: .clientCertificate, scheme: "", realm: "", status: 0)
        challenge.error = alert
        return challenge
    }

    /// The alert of TLS 1.3 (RFC 8446 §6.2) that says a certificate was required.
    public static let certificateRequiredAlert = "certificate_required"

    /// Whether `other` asks the same thing of the same server (an answer to one answers both).
    public func sameQuestion(as other: Challenge) -> Bool {
        kind == other.kind && scheme.lowercased() == other.scheme.lowercased() && realm == other.realm
            && host == other.host && port == other.port && certificates.first == other.certificates.first
    }
}
