import ShownText

/// Why a download failed or a request was refused: a code and a message (the shape of
/// AsyncHTTPClient's `HTTPClientError`). Two errors are equal when their codes are (the message,
/// status and Retry-After say more about the same error), so code compares codes, never names:
/// `error.code == .checksumMismatch`. `name` is stable and is what the service turns into
/// `org.example.Downloads.Error.<name>`.
public struct DownloadError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable, CaseIterable {
        case invalidArgument = "InvalidArgument"
        case notFound = "NotFound"
        case wrongState = "WrongState"
        case invalidResumeData = "InvalidResumeData"
        case notResumable = "NotResumable"
        case httpError = "HTTPError"
        case networkError = "NetworkError"
        case timeout = "Timeout"
        case tooManyRedirects = "TooManyRedirects"
        case insecureRedirect = "InsecureRedirect"
        case invalidResponse = "InvalidResponse"
        case checksumMismatch = "ChecksumMismatch"
        case fileError = "FileError"
        case fileExists = "FileExists"
        case tlsError = "TLSError"
        case cancelled = "Cancelled"
        case interrupted = "Interrupted"
        case accessDenied = "AccessDenied"
        case proxyError = "ProxyError"
        /// An upload's file changed (or was replaced) after `Upload`: nothing more is sent.
        case sourceChanged = "SourceChanged"
        /// A request that may not be sent again on its own (a POST or PATCH sent whole) lost
        /// its answer: the server may or may not have acted on it (RFC 9110 §9.2.2).
        case outcomeUnknown = "OutcomeUnknown"
        /// Ours, not the server's: the engine reached a step it never should (a bug to report).
        case internalError = "InternalError"
    }

    public let code: Code
    public let message: String
    /// The HTTP status, for `HTTPError`.
    public let httpStatus: Int?
    /// Seconds the server asked us to wait (`Retry-After`), when it did.
    public let retryAfter: Double?
    /// Never retried, whatever its class (`notRetried`).
    private var isFinal = false
    /// The question the response that made this error asked (a 401's `WWW-Authenticate`): an
    /// app that answers it may save the task (`Challenge`); nil for any other error.
    public private(set) var challenge: Challenge?

    private init(_ code: Code, _ message: String, httpStatus: Int? = nil, retryAfter: Double? = nil) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
    }

    public static func == (lhs: DownloadError, rhs: DownloadError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// Every name an engine error can have (the service's error table must hold each: a test checks).
    public static var allNames: [String] { Code.allCases.map(\.rawValue) }

    /// The stable name, e.g. `HTTPError`.
    public var name: String { code.rawValue }
    public var description: String { "\(name): \(message)" }

    /// The statuses a server uses for "not now", which are retried: curl's `--retry` set (408,
    /// 429, 500, 502, 503, 504). Other 5xx (501 Not Implemented, 505, 511…) say the same next time.
    public static let transientStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// Whether trying again later may succeed (connection errors, truncated bodies, 408/429/5xx, stalls).
    public var isRetryable: Bool {
        guard !isFinal else { return false }
        switch code {
        case .networkError, .timeout, .interrupted: return true
        case .httpError:
            guard let status = httpStatus else { return false }
            return DownloadError.transientStatuses.contains(status)
        default: return false
        }
    }

    /// The same error, not to be retried: a server that holds every byte of an upload and
    /// refused it (a 5xx sent again would send nothing new).
    public var notRetried: DownloadError {
        var copy = self
        copy.isFinal = true
        return copy
    }

    /// The same error, asking `challenge`.
    public func asking(_ challenge: Challenge) -> DownloadError {
        var copy = self
        copy.challenge = challenge
        return copy
    }

    /// The same error, its challenge (if any) met at `url`.
    public func met(at url: String) -> DownloadError {
        guard let challenge, challenge.url.isEmpty else { return self }
        return asking(challenge.at(url))
    }

    public static func invalidArgument(_ message: String) -> DownloadError { .init(.invalidArgument, message) }
    public static func notFound(_ message: String) -> DownloadError { .init(.notFound, message) }
    public static func wrongState(_ message: String) -> DownloadError { .init(.wrongState, message) }
    public static func invalidResumeData(_ message: String) -> DownloadError { .init(.invalidResumeData, message) }
    public static func notResumable(_ message: String) -> DownloadError { .init(.notResumable, message) }
    public static func http(status: Int, reason: String, retryAfter: Double? = nil) -> DownloadError {
        var message = "the server answered \(status) \(DisplayText.quoted(reason, limit: 60))"
        // What a person can do about it, where there is one thing.
        if status == 401 {
            message += ": it asks for credentials (user:password@ in the URL, or an Authorization header)"
        }
        return .init(.httpError, message, httpStatus: status, retryAfter: retryAfter)
    }
    public static func network(_ message: String) -> DownloadError { .init(.networkError, message) }
    /// A destination the owner may not reach (a denied network).
    public static func accessDenied(_ message: String) -> DownloadError { .init(.accessDenied, message) }
    public static func timeout(_ message: String) -> DownloadError { .init(.timeout, message) }
    /// The proxy refused or could not be reached; `message` names it without credentials.
    public static func proxy(_ message: String) -> DownloadError { .init(.proxyError, message) }
    public static func tooManyRedirects(_ limit: Int) -> DownloadError {
        .init(.tooManyRedirects, "more than \(limit) redirects")
    }
    public static func insecureRedirect(_ message: String) -> DownloadError { .init(.insecureRedirect, message) }
    public static func invalidResponse(_ message: String) -> DownloadError { .init(.invalidResponse, message) }
    public static func checksumMismatch(expected: Checksum, actual: String) -> DownloadError {
        .init(
            .checksumMismatch,
            "\(expected.algorithm.displayName) of the download is \(actual), expected \(expected.hex); nothing was kept"
        )
    }
    /// A piece (of a Metalink document's piece hashes) that no source served right.
    public static func checksumMismatch(_ message: String) -> DownloadError { .init(.checksumMismatch, message) }
    public static func file(_ message: String) -> DownloadError { .init(.fileError, message) }
    public static func fileExists(_ path: String) -> DownloadError {
        .init(.fileExists, "\(path) exists; pass overwrite=true to replace it")
    }
    /// An upload's file is not the one it was at `Upload` (`SourceIdentity.change`).
    public static func sourceChanged(_ path: String, _ why: String) -> DownloadError {
        .init(
            .sourceChanged,
            "the file to upload, \(DisplayText.quoted(path, limit: 200)), changed after the upload began: \(why); nothing more is sent (upload it again)"
        )
    }
    /// A non-idempotent request sent whole whose answer was lost (`ResendRule`): never retried.
    public static func outcomeUnknown(_ message: String) -> DownloadError { .init(.outcomeUnknown, message) }
    public static func tls(_ message: String) -> DownloadError { .init(.tlsError, message) }
    public static let cancelled = DownloadError(.cancelled, "the download was cancelled")
    /// A step the engine should never reach (an impossible transition): a bug of ours, named so
    /// that nobody blames the server or the network for it.
    public static func internalError(_ message: String) -> DownloadError { .init(.internalError, message) }
    /// The body ended before its announced length (retried, resuming).
    public static func interrupted(_ message: String) -> DownloadError { .init(.interrupted, message) }
}
