import NIOCore
import NIOSSL
import NIOTLS

/// A TLS handshake that carries no request: what a server presents, to explain a failed check
/// (`TLSDiagnosis`) or to check a task's pinned keys and trusted certificate (`ServerTrust`)
/// before the request's own connection. Made to the address the request's connection uses, so
/// `--deny-network` pins hold; closed at once.
enum TLSProbe {
    struct Handshake {
        /// The server's own certificate.
        let certificate: NIOSSLCertificate?
        /// The chain as the server sent it, its own first (only with `presented`).
        let chain: [NIOSSLCertificate]
    }

    /// A handshake under `configuration`; with `presented`, one that checks nothing and keeps
    /// the chain the server sent (NIOSSL's callback replaces every check BoringSSL makes).
    static func handshake(
        host: String, port: Int, address: String?, configuration: TLSConfiguration, timeout: TimeAmount,
        presented: Bool = false
    ) async throws -> Handshake {
        var configuration = configuration
        if presented { configuration.certificateVerification = .noHostnameVerification }
        let context = try NIOSSLContext(configuration: configuration)
        let serverName = TLSProbeConnection.serverName(host)
        return try await TLSProbeConnection.run(
            host: host, port: port, address: address, timeout: timeout,
            onTimeout: { $0.fail(ChannelError.connectTimeout(timeout)) }
        ) { channel, done in
            let chain = NIOLockedChain()
            let tls =
                presented
                ? try NIOSSLClientHandler(context: context, serverHostname: serverName) { certificates, promise in
                    chain.set(certificates)
                    promise.succeed(.certificateVerified)
                }
                : try NIOSSLClientHandler(context: context, serverHostname: serverName)
            try channel.pipeline.syncOperations.addHandler(tls)
            try channel.pipeline.syncOperations.addHandler(HandshakeWaiter(promise: done, tls: tls, chain: chain))
        }
    }

    /// The chain the verification callback saw (set on the channel's event loop, read there).
    private final class NIOLockedChain: @unchecked Sendable {
        private var certificates: [NIOSSLCertificate] = []
        func set(_ value: [NIOSSLCertificate]) { certificates = value }
        var value: [NIOSSLCertificate] { certificates }
    }

    /// Completes `promise` when the handshake ends, either way.
    private final class HandshakeWaiter: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let promise: EventLoopPromise<Handshake>
        let tls: NIOSSLClientHandler
        let chain: NIOLockedChain

        init(promise: EventLoopPromise<Handshake>, tls: NIOSSLClientHandler, chain: NIOLockedChain) {
            self.promise = promise
            self.tls = tls
            self.chain = chain
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event {
                promise.succeed(Handshake(certificate: tls.peerCertificate, chain: chain.value))
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            promise.fail(error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(ChannelError.ioOnClosedChannel)
            context.fireChannelInactive()
        }
    }
}
