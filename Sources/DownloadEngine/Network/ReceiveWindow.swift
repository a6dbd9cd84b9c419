import NIOCore
import NIOHTTP2

/// Keeps an HTTP/2 receive window open (`HTTP2Windows`): counts the bytes of the DATA frames that
/// pass and, once a read's frames were handed on, gives them back to the server in one
/// `WINDOW_UPDATE`, a `quantum` at least. On a connection (before the stream multiplexer) it
/// gives back what arrived, so the connection's window never limits its streams; on a stream
/// (first in the stream's pipeline) it gives back what the stream's reader took, so a stream's
/// window stays as wide as it was opened while its reader keeps up, and closes when it does not.
/// Not from inside a read: a connection's frame written while `NIOHTTP2Handler` was still handing
/// on the frames it decoded ended a stream of that read (AsyncHTTPClient saw it close early; 1 in
/// 500 small files in `HTTPSTests`).
final class ReceiveWindow<Part>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Part
    typealias InboundOut = Part

    private let quantum: Int
    private let payload: (Part) -> HTTP2Frame.FramePayload
    /// What a window update of `increment` is written as, where this handler sits.
    private let update: (Int) -> NIOAny
    private var received = 0

    private init(
        quantum: Int, payload: @escaping (Part) -> HTTP2Frame.FramePayload, update: @escaping (Int) -> NIOAny
    ) {
        self.quantum = quantum
        self.payload = payload
        self.update = update
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .data(let data) = payload(unwrapInboundIn(data)) {
            // What flow control counts: the data, the padding and its length byte.
            received += data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
        guard received >= quantum else { return }
        let increment = received
        received = 0
        context.writeAndFlush(update(increment), promise: nil)
    }
}

extension ReceiveWindow where Part == HTTP2Frame {
    /// On a connection's pipeline: frames, and the update is the connection's (stream 0).
    static func connection(quantum: Int) -> ReceiveWindow {
        ReceiveWindow(quantum: quantum, payload: \.payload) { increment in
            NIOAny(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment)))
        }
    }
}

extension ReceiveWindow where Part == HTTP2Frame.FramePayload {
    /// On a stream's pipeline: payloads, and the update is the stream's.
    static func stream(quantum: Int) -> ReceiveWindow {
        ReceiveWindow(quantum: quantum, payload: { $0 }) { increment in
            NIOAny(HTTP2Frame.FramePayload.windowUpdate(windowSizeIncrement: increment))
        }
    }
}

@available(*, unavailable)
extension ReceiveWindow: Sendable {}
