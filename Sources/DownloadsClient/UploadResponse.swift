/// An upload's final response (`urlSession(_:dataTask:didReceive:)`'s `HTTPURLResponse`): its
/// status and headers (names lower-cased).
public struct UploadResponse: Sendable, Hashable {
    public var statusCode: Int
    public var headers: [String: String]

    public init(statusCode: Int, headers: [String: String]) {
        self.statusCode = statusCode
        self.headers = headers
    }
}
