import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An HTTP proxy on 127.0.0.1 that answers every forwarded request itself with `content`: the
/// head a line at a time, each line its own segment a pause after the last (as tinyproxy relays
/// a server's head, one write per line), then the body, then it closes. It keeps the request
/// lines it was sent.
public final class SplitHeadProxy: Sendable {
    private let channel: Channel
    public let port: Int
    private let requests: NIOLockedValueBox<[String]>

    public init(content: [UInt8], pause: TimeAmount = .milliseconds(50)) throws {
        let requests = NIOLockedValueBox<[String]>([])
        self.requests = requests
        channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        Answer(content: content, pause: pause, requests: requests))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = channel.localAddress?.port ?? 0
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// The request lines received (`GET http://host:port/path HTTP/1.1`), in order.
    public var requestLines: [String] { requests.withLockedValue { $0 } }

    public func stop() {
        try? channel.close().wait()
    }

    private final class Answer: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let content: [UInt8]
        private let pause: TimeAmount
        private let requests: NIOLockedValueBox<[String]>
        private let received = NIOLockedValueBox<[UInt8]>([])

        init(content: [UInt8], pause: TimeAmount, requests: NIOLockedValueBox<[String]>) {
            self.content = content
            self.pause = pause
            self.requests = requests
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let head: String? = received.withLockedValue { received in
                received += buffer.readBytes(length: buffer.readableBytes) ?? []
                let text = String(decoding: received, as: UTF8.self)
                guard text.contains("\r\n\r\n") else { return nil }
                received = []
                return text
            }
            guard let head else { return }
            requests.withLockedValue { $0.append(head.components(separatedBy: "\r\n").first ?? head) }
            let lines = [
                "HTTP/1.1 200 OK\r\n", "Content-Length: \(content.count)\r\n", "ETag: \"split\"\r\n",
                "Connection: close\r\n", "\r\n",
            ]
            let pieces = lines.map { Array($0.utf8) } + [content]
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            send(pieces[...], bound)
        }

        /// Writes the first piece, then the rest a pause apart (the body at once after the
        /// head's blank line); closes once the last is written.
        private func send(_ pieces: ArraySlice<[UInt8]>, _ bound: NIOLoopBound<ChannelHandlerContext>) {
            let context = bound.value
            guard let first = pieces.first else {
                context.close(promise: nil)
                return
            }
            let rest = pieces.dropFirst()
            let pause = rest.count > 1 ? self.pause : .zero
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: first))).whenComplete {
                [self] _ in
                bound.value.eventLoop.scheduleTask(in: pause) { [self] in send(rest, bound) }
            }
        }
    }
}
