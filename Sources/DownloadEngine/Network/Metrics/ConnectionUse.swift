/// What one request learnt of the connection it went on (`ConnectionWatch`): whether an earlier
/// request had used it, the address at its other end, its TLS version and, on a connection made
/// for it, when that connection was made (Unix microseconds).
struct ConnectionUse: Sendable, Equatable {
    /// An earlier request went on this connection (HTTP/1.1 keep-alive, or another h2 stream).
    var reused: Bool
    /// The peer's IP address: the server's, or the proxy's when the request went through one.
    var remoteAddress: String?
    /// `TLSv1.2`, `TLSv1.3`; nil on a plain connection.
    var tlsVersion: String?
    /// When the service began connecting, where it makes the connection itself (a request
    /// forwarded through an HTTP proxy); nil inside AsyncHTTPClient's pool, which tells nothing.
    var connectStart: Int64?
    /// When the new connection was ready for this request: connected (plain http), the TLS
    /// handshake done (https), and for h2 the server's first SETTINGS read too. nil on a reused
    /// connection, and through a proxy (where it would hold the proxy's handshake as well).
    var readyAt: Int64?

    /// The connection carries TLS to the server: `readyAt` ends the handshake, not the connect.
    var secure: Bool { tlsVersion != nil }
}
