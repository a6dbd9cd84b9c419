import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP relay on 127.0.0.1 in front of a server, for what a real network does to an upload:
/// it counts the bytes clients send through it (all connections together), cuts the connection
/// that carries the total past each of the totals it is given, and can damage one byte in
/// flight (a checksum's test).
public final class CuttingProxy: Sendable {
    struct State {
        var forwarded: Int64 = 0
        var cuts: [Int64] = []
        var damageAt: Int64?
        var connections = 0
    }

    let state = NIOLockedValueBox(State())
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    public let port: Int

    public init(to upstreamPort: Int) throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = self.state
        channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.autoRead, value: false)
            .childChannelInitializer { inbound in
                state.withLockedValue { $0.connections += 1 }
                return ClientBootstrap(group: inbound.eventLoop).connect(host: "127.0.0.1", port: upstreamPort).flatMap
                { outbound in
                    let toServer = Relay(peer: outbound, counts: state)
                    let toClient = Relay(peer: inbound, counts: nil)
                    toServer.partner = toClient
                    toClient.partner = toServer
                    return inbound.pipeline.addHandler(toServer).flatMap {
                        outbound.pipeline.addHandler(toClient)
                    }.flatMap {
                        inbound.setOption(ChannelOptions.autoRead, value: true)
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = channel.localAddress?.port ?? 0
    }

    public var url: String { "http://127.0.0.1:\(port)" }
    /// Bytes clients sent through the relay (headers and bodies), all connections together.
    public var forwarded: Int64 { state.withLockedValue { $0.forwarded } }
    public var connections: Int { state.withLockedValue { $0.connections } }

    /// Cuts the connection that carries the clients' total past each of `totals`.
    public func cut(atTotals totals: [Int64]) { state.withLockedValue { $0.cuts = totals.sorted() } }
    /// Flips the byte at client total `position` (once).
    public func damage(at position: Int64) { state.withLockedValue { $0.damageAt = position } }

    public func stop() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }

    /// One direction of a relayed connection: what it reads goes to `peer`; client to server
    /// `counts` (and cuts, and damages).
    final class Relay: ChannelDuplexHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        let peer: Channel
        let counts: NIOLockedValueBox<State>?
        var partner: Relay?
        // Backpressure (both channels are on one loop): no read while a write to the peer is pending.
        private var writing = 0
        private var readDeferred = false

        init(peer: Channel, counts: NIOLockedValueBox<State>?) {
            self.peer = peer
            self.counts = counts
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            guard let counts else { return relay(buffer, context: context) }
            let (keep, cut, damage) = counts.withLockedValue { state -> (Int, Bool, Int?) in
                let start = state.forwarded
                var keep = buffer.readableBytes
                var cut = false
                if let next = state.cuts.first, start + Int64(keep) >= next {
                    keep = Int(max(0, next - start))
                    state.cuts.removeFirst()
                    cut = true
                }
                var damage: Int?
                if let at = state.damageAt, at >= start, at < start + Int64(keep) {
                    damage = Int(at - start)
                    state.damageAt = nil
                }
                state.forwarded += Int64(keep)
                return (keep, cut, damage)
            }
            if let damage, let byte = buffer.getInteger(at: buffer.readerIndex + damage, as: UInt8.self) {
                buffer.setInteger(byte ^ 0xff, at: buffer.readerIndex + damage)
            }
            if cut {
                let slice = buffer.readSlice(length: keep) ?? ByteBuffer()
                let peer = self.peer
                peer.writeAndFlush(slice).whenComplete { _ in peer.close(promise: nil) }
                context.close(promise: nil)
                return
            }
            relay(buffer, context: context)
        }

        private func relay(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
            writing += 1
            let channel = context.channel
            peer.writeAndFlush(buffer).whenComplete { _ in
                self.writing -= 1
                if self.writing == 0, self.readDeferred {
                    self.readDeferred = false
                    channel.read()
                }
            }
        }

        func read(context: ChannelHandlerContext) {
            if writing > 0 {
                readDeferred = true
            } else {
                context.read()
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            context.close(promise: nil)
        }
    }
}
