import DBus
import DownloadEngine

/// The one table from internal errors to `org.example.Downloads.Error.*` D-Bus errors.
public enum ServiceError {
    public static let prefix = "org.example.Downloads.Error."

    /// Every error name the service replies with or reports in `Failed`, with what it means.
    public static let table: [(name: String, meaning: String)] = [
        ("InvalidArgument", "an argument or option is wrong: unknown key, wrong type, relative path, non-http(s) URL"),
        ("NotFound", "no such task (or it was removed)"),
        ("AccessDenied", "the task belongs to another user"),
        ("WrongState", "the task is not in a state that allows this call"),
        ("InvalidResumeData", "the resume data was not made by this service, was altered or is truncated"),
        ("NotResumable", "the task has nothing to resume from"),
        ("QuotaExceeded", "the caller has too many tasks"),
        ("HTTPError", "the server answered with an error status (Failed only)"),
        ("NetworkError", "the connection failed (Failed only, after retries)"),
        ("Timeout", "connect, stall or whole-transfer timeout (Failed only, after retries)"),
        ("TooManyRedirects", "more than 10 redirects (Failed only)"),
        ("InsecureRedirect", "a redirect to a non-http(s) URL or from https to http (Failed only)"),
        ("InvalidResponse", "a malformed or inconsistent response (Failed only)"),
        ("ChecksumMismatch", "the SHA-256 differs from the sha256 option; nothing was kept (Failed only)"),
        ("FileError", "a file could not be opened, written or renamed (e.g. disk full)"),
        ("FileExists", "the destination exists and overwrite is false"),
        ("TLSError", "the TLS handshake or certificate check failed (Failed only)"),
        ("Cancelled", "the task was cancelled (Failed only)"),
        ("Interrupted", "the body ended early (retried; Failed only when retries ran out)"),
        ("Failed", "an unexpected internal error"),
    ]

    public static func name(_ shortName: String) -> String { prefix + shortName }

    public static func bus(_ error: DownloadError) -> BusError {
        BusError(name: prefix + error.name, message: error.message)
    }

    public static func invalidArgument(_ message: String) -> BusError { BusError(name: prefix + "InvalidArgument", message: message) }
    public static func notFound(_ message: String) -> BusError { BusError(name: prefix + "NotFound", message: message) }
    public static func accessDenied(_ message: String) -> BusError { BusError(name: prefix + "AccessDenied", message: message) }
    public static func quotaExceeded(_ message: String) -> BusError { BusError(name: prefix + "QuotaExceeded", message: message) }
    public static func failed(_ message: String) -> BusError { BusError(name: prefix + "Failed", message: message) }

    /// Any error thrown inside a handler, as a reply.
    public static func reply(for error: Error) -> BusError {
        switch error {
        case let error as BusError: return error
        case let error as DownloadError: return bus(error)
        default: return failed("\(error)")
        }
    }
}
