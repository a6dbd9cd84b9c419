import AsyncHTTPClient
import NIOCore

/// What `RequestSender` needs of the delegate a response streams into, beyond AsyncHTTPClient's
/// callbacks: a download's delegate (the body into the file) and an upload's (the request's body
/// from the file, the reply kept).
protocol ResponseReceiver: HTTPClientResponseDelegate, Sendable where Response: Sendable {
    /// The response as far as it went, when the request ended with an error after its head
    /// (read once the request's future completed).
    var partialResult: Response? { get }
    /// Whether the request's head went out (through a proxy, only once the tunnel was open).
    var requestHeadSent: Bool { get }
    /// When its head went out and the response's came, and what answered (read once the
    /// request's future completed).
    var marks: RequestMarks { get }
    /// Ends a wait of the delegate's own (a rate limit's) so a cancelled request ends now.
    func interrupt(on eventLoop: EventLoop)
}
