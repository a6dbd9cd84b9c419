import Foundation

/// What the server does for one path. Every knob is a misbehaviour a real server can show.
public struct Route: Sendable {
    public var content: [UInt8]
    /// Serve 206 for `Range` requests.
    public var ranges = true
    /// Sent as `ETag` (use `W/"…"` for a weak one); nil for none.
    public var etag: String? = "\"v1\""
    /// Sent as `Last-Modified` (with a `Date` header of now).
    public var lastModified: Date?
    /// A hostile server: 304 to every request, conditional or not.
    public var alwaysNotModified = false
    /// Bytes per second for the body; nil for as fast as possible.
    public var bytesPerSecond: Int?
    /// Bytes per second for requests without a `Range` header (overrides `bytesPerSecond` for them).
    public var bytesPerSecondWithoutRange: Int?
    /// Stop sending after this many body bytes of a response, keeping the connection open.
    public var stallAfter: Int?
    /// Close the connection after this many body bytes of a response.
    public var closeAfter: Int?
    /// Apply stallAfter/closeAfter to this many requests only (nil: every request).
    public var misbehaveTimes: Int?
    /// Apply stallAfter/closeAfter only to requests with a `Range` header (the ranges of a
    /// segmented download; `misbehaveTimes` still counts every request).
    public var misbehaveRangedOnly = false
    /// Answer a ranged request starting at or after this offset with 200 and the whole body
    /// (a server that ignores ranges while it advertises them).
    public var wholeBodyForRangesFrom: Int?
    /// Answer the first `count` requests with `status` (and `Retry-After` when set).
    public var failFirst: (count: Int, status: Int, retryAfter: String?)?
    /// Answer every request after the first `count` with `status` (a signed URL that expired:
    /// with `closeAfter` and `misbehaveTimes: 1`, the first response is cut and the link is dead).
    public var failAfter: (count: Int, status: Int)?
    /// `(status, location)`: redirect instead of serving.
    public var redirect: (status: Int, location: String)?
    /// Send this Content-Length instead of the true one.
    public var contentLengthOverride: String?
    /// Also send a second, different Content-Length header.
    public var conflictingContentLength = false
    /// Use chunked transfer encoding (no Content-Length).
    public var chunked = false
    /// Answer a ranged request with this Content-Range instead of the true one.
    public var contentRangeOverride: String?
    /// Serve with `Content-Encoding: gzip` (the bytes are served as they are).
    public var gzipEncoding = false
    /// Sent as Content-Disposition.
    public var contentDisposition: String?
    /// More response headers, sent as they are (`Link`, `Digest`…).
    public var extraHeaders: [(String, String)] = []

    // MARK: Uploads

    /// Take request bodies (PUT, POST, PATCH): each is kept (`TestHTTPServer.received`) and
    /// answered with `uploadStatus`, `content` as the reply's body (and `extraHeaders`).
    /// `failFirst` and `redirect` answer once the body was read; `closeAfter` does not apply.
    public var receives = false
    public var uploadStatus = 201
    /// Close the connection once this many bytes of a request's body arrived (`misbehaveTimes`
    /// counts the requests it applies to).
    public var cutUploadAfter: Int?
    /// Answer an upload only this many seconds after its body ended (a slow final response), any
    /// other request this many seconds after it arrived.
    public var replyDelay: Double?
    /// Answer 401 to a request whose `Authorization` is not this.
    public var requiredAuthorization: String?
    /// The `WWW-Authenticate` of that 401 (default `Basic realm="test"`); `{n}` in it becomes the
    /// route's count of requests (a realm that changes on every 401).
    public var authenticate: String?
    /// Answer 401 (with its `Digest` challenge) to a request that does not answer this login.
    public var digest: DigestLogin?
    /// Give that 401 as soon as the head came, and close the connection without reading the body
    /// (as nginx refuses an upload).
    public var refusesEarly = false
    /// Read a request's body at about this many bytes a second (a slow server: the sender's
    /// writes wait for the socket).
    public var readBytesPerSecond: Int?
    /// Keep only the count of a body's bytes, not the bytes (big uploads).
    public var discardBodies = false
    /// Take an `OPTIONS` and never answer it (a server that swallows the question); counted in
    /// `TestHTTPServer.optionsAsked`.
    public var silentOptions = false

    public init(content: [UInt8]) {
        self.content = content
    }

    /// A route that takes uploads and answers `status` with `reply`.
    public static func receiving(status: Int = 201, reply: String = "stored\n") -> Route {
        var route = Route(content: Array(reply.utf8))
        route.receives = true
        route.uploadStatus = status
        route.etag = nil
        route.ranges = false
        return route
    }
}

/// One request body a receiving route took (or began to take).
public struct ReceivedUpload: Sendable, Hashable {
    public let path: String
    public let method: String
    /// Request headers, names lower-cased (repeated ones joined with ", ").
    public let headers: [String: String]
    /// The body (empty with `discardBodies`).
    public var body: [UInt8]
    public var bytes: Int
    /// The body ended (false: the connection was cut, or it is still coming).
    public var complete: Bool
    /// Which connection carried it.
    public let connection: Int
}

/// One request as the server saw it.
public struct RequestRecord: Sendable, Hashable {
    public let path: String
    public let range: String?
    public let ifRange: String?
    public let acceptEncoding: String?
    /// `X-*` headers, the credential headers (Authorization, Cookie, Proxy-Authorization) and
    /// `Referer`, `If-Modified-Since`, `If-None-Match`, lowercased names.
    public let userHeaders: [String: String]
    public let status: Int
    /// Body bytes the server wrote (or tried to) for this request.
    public var bodyBytesSent: Int
    /// Which connection carried it (1 for the server's first, counting up).
    public let connection: Int
}
