/// What makes a task an upload (`DownloadTaskRecord.upload`): the file it sends and how, where
/// the server's reply goes, and the reply once it came. Stored with the task (the `upload`
/// column holds it as JSON, the reply's body beside it) and carried in resume data.
public struct UploadSpec: Sendable, Hashable, Codable {
    /// The methods an upload may use.
    public static let methods = ["PUT", "POST", "PATCH"]
    /// The most of a reply's body kept for `GetReply` when no `reply_destination` is given
    /// (BITS's `GetReplyData` keeps up to 1 MiB too).
    public static let maxKeptReply = 1 << 20

    /// The file as the caller named it (`Upload`), or where its descriptor led (`UploadAt`).
    public var source: String
    /// The file can be opened again by path (`Upload`); false: only through the descriptor
    /// the caller handed over, which a restart does not keep (`UploadAt`).
    public var reopensByPath: Bool
    /// `PUT`, `POST` or `PATCH`.
    public var method: String
    /// The request's `Content-Type` (the file part's in a form); nil: `application/octet-stream`.
    public var contentType: String?
    /// Sent as `multipart/form-data` when set.
    public var form: MultipartForm?
    /// Where the reply's body is written (made as the caller), nil: kept for `GetReply`.
    public var replyDestination: String?
    /// The copy of the file in the state directory (option `snapshot`), sent instead of the file.
    public var snapshot: String?
    /// The source as it was at `Upload`.
    public var identity: SourceIdentity
    /// The final response's status, 0 until there is one.
    public var responseStatus: Int = 0
    /// The final response's headers (names lower-cased; repeated ones joined with ", ").
    public var replyHeaders: [String: String] = [:]
    /// A final response's body just received (up to `maxKeptReply` bytes, when no
    /// `replyDestination` takes it), on its way to the store, which keeps it in a column of its
    /// own and hands it out on `GetReply`: never held in memory beyond that write, never loaded
    /// with the task. nil: nothing new (the store keeps what it has).
    public var newReplyBody: [UInt8]?
    /// Option `protocol`; nil (a row from before it): plain.
    public var transferProtocol: UploadProtocol?
    /// Option `ietf_version`: the draft's interop version to speak; nil: the newest spoken.
    public var ietfVersion: Int?
    /// Option `terminate_on_cancel`; nil: true.
    public var terminateOnCancel: Bool?
    /// The resumable protocol's state once the server said which it speaks; nil: not asked yet
    /// (or plain).
    public var resumable: ResumableUpload?
    /// A request that may not be sent again on its own (`ResendRule`: a POST or PATCH without an
    /// `Idempotency-Key`) went out whole and no answer has come yet: recorded, so that a daemon
    /// killed before the answer does not send it again at its next start (the task fails
    /// `OutcomeUnknown`). Cleared by an answer, and by `Resume` (the app's decision). nil: false.
    public var sentWhole: Bool?

    /// The protocol asked for (`plain` for rows from before the option).
    public var requestedProtocol: UploadProtocol { transferProtocol ?? .plain }

    public init(
        source: String, reopensByPath: Bool, method: String, contentType: String?, form: MultipartForm?,
        replyDestination: String?, snapshot: String?, identity: SourceIdentity
    ) {
        self.source = source
        self.reopensByPath = reopensByPath
        self.method = method
        self.contentType = contentType
        self.form = form
        self.replyDestination = replyDestination
        self.snapshot = snapshot
        self.identity = identity
    }

    /// The request's body: the form's head, the file, the form's end.
    public var bodyPrefix: [UInt8] { form?.prefix(contentType: contentType) ?? [] }
    public var bodySuffix: [UInt8] { form?.suffix ?? [] }
    /// The body's length in bytes (`BytesExpected` of an upload).
    public var bodyLength: Int64 { Int64(bodyPrefix.count) + identity.size + Int64(bodySuffix.count) }
    /// The request's `Content-Type`.
    public var requestContentType: String { form?.contentType ?? contentType ?? "application/octet-stream" }

    enum CodingKeys: String, CodingKey {
        case source
        case reopensByPath = "reopens_by_path"
        case method
        case contentType = "content_type"
        case form
        case replyDestination = "reply_destination"
        case snapshot
        case identity
        case responseStatus = "response_status"
        case replyHeaders = "reply_headers"
        case transferProtocol = "protocol"
        case ietfVersion = "ietf_version"
        case terminateOnCancel = "terminate_on_cancel"
        case resumable
        case sentWhole = "sent_whole"
    }
}
