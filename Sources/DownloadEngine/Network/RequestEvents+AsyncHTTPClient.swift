import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// AsyncHTTPClient's callbacks, each the transport-independent event of `RequestEvents`: the one
/// adapter a download's delegate (`TransferDelegate`) and an upload's (`UploadDelegate`) share.
extension RequestEvents {
    func didSendRequestHead(task: HTTPClient.Task<Response>, _ head: HTTPRequestHead) {
        sentHead(InFlightRequest(task))
    }
    func didSendRequestPart(task: HTTPClient.Task<Response>, _ part: IOData) {
        sentBodyPart(part.readableBytes, InFlightRequest(task))
    }
    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        receivedHead(head, InFlightRequest(task))
    }
    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        receivedBodyPart(buffer, InFlightRequest(task))
    }
    func didReceiveError(task: HTTPClient.Task<Response>, _ error: Error) { receivedError() }
    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response { try finished() }
}
