import NIOCore
import NIOPosix
import ProxyRules

/// One connection that carries no request, to the address a task's requests use (so
/// `--deny-network` pins hold): the skeleton both TLS probes share. `TLSProbe` reads a finished
/// handshake, `CertificateRequestProbe` a server's first flight; each puts its handlers in the
/// pipeline (`handlers`) and completes the promise it is given. The connection is closed once the
/// promise is, or at `timeout`, when `onTimeout` completes it.
enum TLSProbeConnection {
    static func run<Outcome: Sendable>(
        host: String, port: Int, address: String?, timeout: TimeAmount,
        onTimeout: @escaping @Sendable (EventLoopPromise<Outcome>) -> Void,
        handlers: @escaping @Sendable (Channel, EventLoopPromise<Outcome>) throws -> Void
    ) async throws -> Outcome {
        let group = MultiThreadedEventLoopGroup.singleton
        let done = group.next().makePromise(of: Outcome.self)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try handlers(channel, done) }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.connect(host: address ?? host, port: port).get()
        } catch {
            done.fail(error)
            throw error
        }
        let timer = channel.eventLoop.scheduleTask(in: timeout) { onTimeout(done) }
        defer {
            timer.cancel()
            channel.close(promise: nil)
        }
        return try await done.futureResult.get()
    }

    /// The SNI name of `host`: none for an address literal.
    static func serverName(_ host: String) -> String? { NetworkRange.parse(host) == nil ? host : nil }
}
