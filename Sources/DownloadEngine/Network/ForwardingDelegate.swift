import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// A response delegate that a request forwarded through an HTTP proxy (`ForwardedRequest`)
/// drives as AsyncHTTPClient drives it: each AsyncHTTPClient callback of the delegate is one of
/// these, request-independent (a download's and an upload's delegate).
protocol ForwardingDelegate: ResponseReceiver {
    func sentHead(_ request: InFlightRequest)
    /// `bytes` more of the request's body went out.
    func sentBodyPart(_ bytes: Int, _ request: InFlightRequest)
    func receivedHead(_ head: HTTPResponseHead, _ request: InFlightRequest) -> EventLoopFuture<Void>
    func receivedBodyPart(_ buffer: ByteBuffer, _ request: InFlightRequest) -> EventLoopFuture<Void>
    func finished() throws -> Response
    func receivedError()
}

extension ForwardingDelegate {
    func sentBodyPart(_ bytes: Int, _ request: InFlightRequest) {}
}
