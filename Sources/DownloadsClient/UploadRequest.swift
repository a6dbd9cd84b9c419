import FoundationEssentials

/// What `DownloadSession.uploadTask(with:fromFile:)` sends, in the shape of the parts of a
/// `URLRequest` an upload uses: the URL, the method and the headers.
public struct UploadRequest: Sendable, Hashable {
    public var url: URL
    /// `PUT` (default), `POST` or `PATCH`.
    public var httpMethod: String
    /// Request headers; a `Content-Type` among them is the body's.
    public var allHTTPHeaderFields: [String: String]

    public init(url: URL, httpMethod: String = "PUT", allHTTPHeaderFields: [String: String] = [:]) {
        self.url = url
        self.httpMethod = httpMethod
        self.allHTTPHeaderFields = allHTTPHeaderFields
    }
}
