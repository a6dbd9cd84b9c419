import NIOCore
import NIOHTTP1

/// Sits between AsyncHTTPClient's request handler and the wire (after the HTTP/1.1 encoder, or
/// after an h2 stream's codec): takes `ConnectionWatch.header` out of each request's head before
/// it is encoded, so no server or proxy ever sees it, and tells the watch which connection the
/// request with that tag went on.
final class TransactionTagHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private let watch: ConnectionWatch
    /// nil: a stream whose connection's record was not found (it is stripped all the same).
    private let record: ConnectionRecord?

    init(watch: ConnectionWatch, record: ConnectionRecord?) {
        self.watch = watch
        self.record = record
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var head) = unwrapOutboundIn(data), head.headers.contains(name: ConnectionWatch.header)
        else {
            context.write(data, promise: promise)
            return
        }
        let tags = head.headers[ConnectionWatch.header]
        head.headers.remove(name: ConnectionWatch.header)
        if let record, let tag = tags.first { watch.note(tag, record.use()) }
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}

@available(*, unavailable)
extension TransactionTagHandler: Sendable {}
