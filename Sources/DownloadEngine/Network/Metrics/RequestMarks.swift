import DownloadModel
import NIOHTTP1

/// What a request's delegate saw of it, for its `TransactionMetrics`: when its head went out and
/// the response's head came (Unix microseconds), what answered and the body bytes each way.
/// Event-loop state of the delegate, read (as `partialResult` is) only after the request ended.
struct RequestMarks: Sendable {
    var requestStart: Int64?
    var responseStart: Int64?
    /// `http/1.1`, `http/1.0`, `h2`; "" before a response.
    var version = ""
    var status = 0
    var bytesSent: Int64 = 0
    var bytesReceived: Int64 = 0

    mutating func sentHead() {
        if requestStart == nil { requestStart = TaskMetrics.now }
    }

    mutating func receivedHead(_ head: HTTPResponseHead) {
        responseStart = TaskMetrics.now
        status = Int(head.status.code)
        version = Self.name(of: head.version)
    }

    static func name(of version: HTTPVersion) -> String {
        switch (version.major, version.minor) {
        case (2, _): return "h2"
        case (3, _): return "h3"
        default: return "http/\(version.major).\(version.minor)"
        }
    }
}
