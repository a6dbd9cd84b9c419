import AsyncHTTPClient
import DownloadModel
import NIOCore

/// One request on its way, as `RequestSender.send` holds it: AsyncHTTPClient's task, or a
/// request forwarded through an HTTP proxy (`ForwardedRequest`).
protocol OutgoingRequest<Response>: AnyObject, Sendable {
    associatedtype Response: Sendable
    var eventLoop: EventLoop { get }
    /// The response's result, once the delegate finished it (or the request's failure).
    var futureResult: EventLoopFuture<Response> { get }
    func cancel()
    /// The connection, where the request makes its own (`ForwardedRequest`); nil for
    /// AsyncHTTPClient's, which `ConnectionWatch` tells of instead.
    var connectionUse: ConnectionUse? { get }
}

extension HTTPClient.Task: OutgoingRequest {
    var connectionUse: ConnectionUse? { nil }
}
