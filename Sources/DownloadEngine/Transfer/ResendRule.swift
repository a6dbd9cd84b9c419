import DownloadModel

/// When a request whose answer did not arrive may be sent again on its own, as RFC 9110 §9.2.2
/// says: "A user agent SHOULD NOT automatically retry a request with a non-idempotent method
/// unless it has some means to know that the request semantics are actually idempotent,
/// regardless of the method, or some means to detect that the original request was never
/// applied." Pure, so it is tested without I/O; every request of a plain upload asks it.
///
/// - A complete final response head is the outcome, whatever the connection does next: this rule
///   is only asked when none came.
/// - Idempotent methods (§9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE) may be sent again.
/// - A non-idempotent one (POST, PATCH, any other name) may be sent again when the server cannot
///   have applied it: its head never went out, or its body was not written completely (a server
///   does not act on a request it has not read to the end); or when the app made it safe with an
///   `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header).
/// - Otherwise the outcome is unknown: the task fails with `OutcomeUnknown`, and only the app
///   (`Resume`) decides to send it again.
public enum ResendRule {
    public static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]

    /// Whether `method` is idempotent by RFC 9110 (method names are case-sensitive).
    public static func isIdempotent(_ method: String) -> Bool { idempotentMethods.contains(method) }

    /// Whether `headers` (names in any case) hold an `Idempotency-Key`.
    public static func hasIdempotencyKey(_ headerNames: some Sequence<String>) -> Bool {
        headerNames.contains { $0.lowercased() == "idempotency-key" }
    }

    /// The request as it went when its answer was lost.
    public struct Attempt: Sendable, Equatable {
        public var method: String
        public var idempotencyKey: Bool
        public var headSent: Bool
        public var bodyLength: Int64
        public var bodySent: Int64

        public init(method: String, idempotencyKey: Bool, headSent: Bool, bodyLength: Int64, bodySent: Int64) {
            self.method = method
            self.idempotencyKey = idempotencyKey
            self.headSent = headSent
            self.bodyLength = bodyLength
            self.bodySent = bodySent
        }

        /// The request as it went: its headers' names say whether it carries an `Idempotency-Key`.
        public init(method: String, headers: some Sequence<String>, headSent: Bool, bodyLength: Int64, bodySent: Int64)
        {
            self.init(
                method: method, idempotencyKey: ResendRule.hasIdempotencyKey(headers), headSent: headSent,
                bodyLength: bodyLength, bodySent: bodySent)
        }

        /// Whether the server may hold the whole request (and so may have acted on it).
        public var mayHaveBeenApplied: Bool { headSent && bodySent >= bodyLength }
    }

    /// nil: `attempt` may be sent again; else the error the task fails with (never retried).
    public static func doubt(about attempt: Attempt, lost error: DownloadError) -> DownloadError? {
        guard !isIdempotent(attempt.method), !attempt.idempotencyKey, attempt.mayHaveBeenApplied else { return nil }
        return .outcomeUnknown(
            "the \(attempt.method) was sent whole (\(attempt.bodySent) bytes) but its answer was lost (\(error)); "
                + "it is not sent again on its own, since the server may have acted on it "
                + "(Resume sends it again; an Idempotency-Key header makes such retries safe)"
        )
    }

    /// nil: a success answered before the server read the whole body may be sent again; else
    /// the error the task fails with.
    public static func doubt(aboutEarlySuccess status: Int, of attempt: Attempt) -> DownloadError? {
        guard !isIdempotent(attempt.method), !attempt.idempotencyKey else { return nil }
        return .outcomeUnknown(
            "the server answered \(status) to the \(attempt.method) after \(attempt.bodySent) of \(attempt.bodyLength) bytes; "
                + "it is not sent again on its own, since the server may have acted on it "
                + "(Resume sends it again; an Idempotency-Key header makes such retries safe)"
        )
    }
}
