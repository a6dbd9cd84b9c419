import NIOCore
import NIOPosix

/// A TCP server on 127.0.0.1 that reads a client's first bytes (a TLS ClientHello) and closes the
/// connection: a server that refuses TLS mid-handshake.
public final class HandshakeClosingServer: Sendable {
    private let channel: Channel
    public let port: Int

    public init() throws {
        channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(CloseOnRead()) }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = channel.localAddress?.port ?? 0
    }

    public func stop() {
        try? channel.close().wait()
    }

    private final class CloseOnRead: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.close(promise: nil)
        }
    }
}
