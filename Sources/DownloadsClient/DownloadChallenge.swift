/// A question a task met that the app answers (`URLAuthenticationChallenge`'s role): the
/// service's `HandleChallenge` as the delegate hears it.
public struct DownloadChallenge: Sendable, Hashable {
    /// `http-auth` (a server's 401), `proxy-auth` (a proxy's 407), … (the service's kinds).
    public let kind: String
    /// `Basic`, `Bearer`, `Digest`, … as the server wrote it.
    public let scheme: String
    public let realm: String
    public let host: String
    public let port: UInt16
    /// The URL that was asked, without credentials.
    public let url: String
    /// Answers of this app the server already refused for this task
    /// (`previousFailureCount`).
    public let previousFailureCount: UInt32
    /// `server-trust`: the chain the server presented (DER, its own first) and why this system
    /// refused it (`URLProtectionSpace.serverTrust`'s role).
    public var serverCertificates: [[UInt8]] = []
    public var serverTrustError = ""
    /// `client-certificate`: the DER names of the CAs the server takes (`distinguishedNames`).
    public var acceptedIssuers: [[UInt8]] = []
    /// `link-expired` and `http-auth`: the status that asked.
    public var status: UInt32 = 0

    public init(
        kind: String, scheme: String, realm: String, host: String, port: UInt16, url: String,
        previousFailureCount: UInt32
    ) {
        self.kind = kind
        self.scheme = scheme
        self.realm = realm
        self.host = host
        self.port = port
        self.url = url
        self.previousFailureCount = previousFailureCount
    }
}
