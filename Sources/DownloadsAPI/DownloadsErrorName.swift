import DBus

/// Every error name the service replies with or reports in `Failed`, with what it means: the one
/// table behind `org.example.Downloads.Error.*` (docs/api.md's table is this one).
public enum DownloadsErrorName: String, Sendable, Hashable, CaseIterable {
    case invalidArgument = "InvalidArgument"
    case notFound = "NotFound"
    case accessDenied = "AccessDenied"
    case wrongState = "WrongState"
    case invalidResumeData = "InvalidResumeData"
    case notResumable = "NotResumable"
    case quotaExceeded = "QuotaExceeded"
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
    case storageFull = "StorageFull"
    case proxyError = "ProxyError"
    case sourceChanged = "SourceChanged"
    case outcomeUnknown = "OutcomeUnknown"
    case internalError = "InternalError"
    case failed = "Failed"

    public static let prefix = "org.example.Downloads.Error."

    /// `org.example.Downloads.Error.<Name>`.
    public var fullName: String { DownloadsErrorName.prefix + rawValue }

    /// The short name of a full error name of ours, or nil.
    public init?(fullName: String) {
        guard fullName.hasPrefix(DownloadsErrorName.prefix) else { return nil }
        self.init(rawValue: String(fullName.dropFirst(DownloadsErrorName.prefix.count)))
    }

    public func error(_ message: String) -> BusError { BusError(name: fullName, message: message) }

    /// Whether `Resume` of a task that failed with this error may get further: the network,
    /// the disk or the trust store may have changed since. A refused request (404, an insecure
    /// redirect, a malformed response, a checksum that differs) fails the same way again.
    /// `HTTPError` counts when its status is one servers use for "later" (408, 429, 500, 502, 503, 504: curl's `--retry` set), which
    /// the engine's message states as "the server answered NNN".
    public func isWorthResuming(message: String) -> Bool {
        switch self {
        case .networkError, .timeout, .interrupted, .fileError, .tlsError, .proxyError: return true
        case .httpError:
            let prefix = "the server answered "
            guard message.hasPrefix(prefix), let status = Int(message.dropFirst(prefix.count).prefix(3)) else {
                return false
            }
            return [408, 429, 500, 502, 503, 504].contains(status)
        default: return false
        }
    }

    public var meaning: String {
        switch self {
        case .invalidArgument:
            return "an argument or option is wrong: unknown key, wrong type, relative path, non-http(s) URL"
        case .notFound: return "no such task, or it belongs to another user (the two answer alike)"
        case .accessDenied: return "the caller cannot be identified, or a name it gave is not its own"
        case .wrongState: return "the task is not in a state that allows this call"
        case .invalidResumeData:
            return "the resume data was not made by this service for this user, was altered or is truncated"
        case .notResumable: return "the task has nothing to resume from"
        case .quotaExceeded:
            return "a per-user limit (tasks, sessions, completion handlers) or an argument's size in bytes"
        case .httpError: return "the server answered with an error status (Failed only)"
        case .networkError: return "the connection failed (Failed only, after retries)"
        case .timeout: return "connect, stall or whole-transfer timeout (Failed only, after retries)"
        case .tooManyRedirects: return "more than 10 redirects (Failed only)"
        case .insecureRedirect: return "a redirect to a non-http(s) URL or from https to http (Failed only)"
        case .invalidResponse: return "a malformed or inconsistent response (Failed only)"
        case .checksumMismatch:
            return "the digest differs from the checksum (or sha256) option; nothing was kept (Failed only)"
        case .fileError: return "a file could not be opened, written or renamed (e.g. disk full)"
        case .fileExists: return "the destination exists and overwrite is false"
        case .tlsError: return "the TLS handshake or certificate check failed (Failed only)"
        case .cancelled: return "the task was cancelled (Failed only)"
        case .interrupted: return "the body ended early (retried; Failed only when retries ran out)"
        case .storageFull: return "the state directory cannot take a write (its disk is full): the call changed nothing"
        case .proxyError:
            return
                "the proxy could not be reached, asked for credentials (407) or refused the tunnel; the message names it, never its password (Failed only)"
        case .sourceChanged:
            return
                "an upload's file changed, was replaced or shrank after Upload; nothing more is sent (Failed, and ResumeWithData)"
        case .outcomeUnknown:
            return
                "a POST or PATCH went out whole and its answer was lost: the server may have acted on it, so it is not sent again on its own (Failed only; Resume sends it again)"
        case .internalError:
            return
                "ours, not the server's: the transfer reached a step it never should; the message names it (Failed only; please report it)"
        case .failed: return "an unexpected internal error"
        }
    }
}
