/// One request of a task as it went (`URLSessionTaskTransactionMetrics`' shape): what was asked
/// of which source, what came back, and when each phase began and ended, in Unix microseconds.
/// Only what the service saw is here: a phase it cannot see (the name lookup AsyncHTTPClient
/// makes inside its pool, when its connect ended and its TLS handshake began) is nil, never
/// guessed.
public struct TransactionMetrics: Sendable, Hashable, Codable {
    /// The request's URL, without credentials.
    public var url: String
    /// `url` (the task's URL, or where it redirected to) or `mirror`.
    public var source: String
    /// The `Range` asked for (`bytes=N-`), "" for the whole.
    public var range: String
    /// `http/1.1`, `http/1.0` or `h2`, from the response; "" when none came.
    public var `protocol`: String
    /// The response's status, 0 when none came.
    public var status: Int
    /// The peer's IP address: the server's, or the proxy's when the request went through one
    /// (else, when no connection was made, the address the service had looked up and tried).
    public var remoteAddress: String?
    /// An earlier request had used the connection; nil when the request reached none.
    public var reusedConnection: Bool?
    /// `TLSv1.2`, `TLSv1.3` on a TLS connection.
    public var tlsVersion: String?
    /// The request was handed to the HTTP client (or, with `lookupStart`, to the service's own
    /// name lookup first).
    public var fetchStart: Int64
    public var lookupStart: Int64?
    public var lookupEnd: Int64?
    /// Where the service makes the connection itself (a request forwarded through an HTTP
    /// proxy): when it began connecting.
    public var connectStart: Int64?
    /// A new plain connection was ready (connected); nil on a reused one and through a proxy.
    public var connectEnd: Int64?
    /// A new TLS connection was ready (its handshake done; for h2 the server's SETTINGS read
    /// too); nil on a reused one and through a proxy.
    public var tlsEnd: Int64?
    /// The request's head was written to the connection (after any connection and handshake).
    public var requestStart: Int64?
    /// The response's head arrived.
    public var responseStart: Int64?
    /// The response ended, or the request failed.
    public var responseEnd: Int64
    /// Body bytes each way.
    public var bytesSent: Int64
    public var bytesReceived: Int64
    /// Why it ended short ("" when a response came whole): the error's name.
    public var error: String

    public init(
        url: String, source: String, range: String, protocol: String, status: Int, remoteAddress: String?,
        fetchStart: Int64, lookupStart: Int64?, lookupEnd: Int64?, requestStart: Int64?, responseStart: Int64?,
        responseEnd: Int64, bytesSent: Int64, bytesReceived: Int64, error: String, reusedConnection: Bool? = nil,
        tlsVersion: String? = nil, connectStart: Int64? = nil, connectEnd: Int64? = nil, tlsEnd: Int64? = nil
    ) {
        self.url = url
        self.source = source
        self.range = range
        self.protocol = `protocol`
        self.status = status
        self.remoteAddress = remoteAddress
        self.fetchStart = fetchStart
        self.lookupStart = lookupStart
        self.lookupEnd = lookupEnd
        self.requestStart = requestStart
        self.responseStart = responseStart
        self.responseEnd = responseEnd
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.error = error
        self.reusedConnection = reusedConnection
        self.tlsVersion = tlsVersion
        self.connectStart = connectStart
        self.connectEnd = connectEnd
        self.tlsEnd = tlsEnd
    }

    enum CodingKeys: String, CodingKey {
        case url, source, range, `protocol`, status
        case remoteAddress = "remote_address"
        case fetchStart = "fetch_start"
        case lookupStart = "lookup_start"
        case lookupEnd = "lookup_end"
        case reusedConnection = "reused_connection"
        case tlsVersion = "tls_version"
        case connectStart = "connect_start"
        case connectEnd = "connect_end"
        case tlsEnd = "tls_end"
        case requestStart = "request_start"
        case responseStart = "response_start"
        case responseEnd = "response_end"
        case bytesSent = "bytes_sent"
        case bytesReceived = "bytes_received"
        case error
    }
}
