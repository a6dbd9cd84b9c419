import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// The events of one request, whichever transport carries it: AsyncHTTPClient (each of its
/// delegate callbacks is one of these) or `ForwardedRequest` (plain http through an HTTP proxy),
/// and any transport a new kind of source brings. A download's delegate and an upload's take
/// them alike; none of them names a transport.
protocol RequestEvents: ResponseReceiver {
    func sentHead(_ request: InFlightRequest)
    /// `bytes` more of the request's body went out.
    func sentBodyPart(_ bytes: Int, _ request: InFlightRequest)
    func receivedHead(_ head: HTTPResponseHead, _ request: InFlightRequest) -> EventLoopFuture<Void>
    func receivedBodyPart(_ buffer: ByteBuffer, _ request: InFlightRequest) -> EventLoopFuture<Void>
    func finished() throws -> Response
    func receivedError()
}

extension RequestEvents {
    func sentBodyPart(_ bytes: Int, _ request: InFlightRequest) {}
}
