import NIOCore
import NIOHTTP2

/// Hands an HTTP/2 stream's body on in parts of up to `largest` bytes instead of a part a DATA
/// frame. nginx sends frames of 8 KiB (`http2_chunk_size`), and NIO hands a stream every frame it
/// holds in one go once the stream reads: with a 16 MiB window, two thousand parts at once.
/// AsyncHTTPClient keeps the parts its reader has not taken in an array it copies whole on every
/// append, so their cost grew with the square of their number (two fifths of the daemon's CPU in
/// a 1 GiB download, Benchmarks/RESULTS.md, "HTTPS at curl's cost"). Here the frames of one read
/// are joined (a copy of each byte, once) and handed on at the read's end, at `largest`, before
/// any other frame, and with the last one (`END_STREAM`).
final class StreamBody: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    private let largest: Int
    /// The body bytes of this read not handed on yet.
    private var held: ByteBuffer?

    init(largest: Int) {
        self.largest = largest
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .data(var frame) = unwrapInboundIn(data), case .byteBuffer(var bytes) = frame.data else {
            handOn(context)
            return context.fireChannelRead(data)
        }
        if var joined = held {
            held = nil
            joined.writeBuffer(&bytes)
            bytes = joined
        } else if !frame.endStream {
            // Held in a buffer of the part's size, the next frames of the read copied beside it.
            var joined = context.channel.allocator.buffer(capacity: max(largest, bytes.readableBytes))
            joined.writeBuffer(&bytes)
            held = joined
            return
        }
        if frame.endStream || bytes.readableBytes >= largest {
            frame.data = .byteBuffer(bytes)
            frame.paddingBytes = nil
            return context.fireChannelRead(wrapInboundOut(.data(frame)))
        }
        held = bytes
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        handOn(context)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        handOn(context)
        context.fireChannelInactive()
    }

    /// What is held goes on as one DATA frame.
    private func handOn(_ context: ChannelHandlerContext) {
        guard let bytes = held else { return }
        held = nil
        context.fireChannelRead(wrapInboundOut(.data(.init(data: .byteBuffer(bytes)))))
    }
}

@available(*, unavailable)
extension StreamBody: Sendable {}
