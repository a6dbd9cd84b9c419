import NIOCore
import NIOSSL

/// Whether a TLS server asks its clients for a certificate, and which CAs it names for it.
/// A server that wants one may still finish the handshake and refuse the request instead
/// (nginx's `ssl_verify_client on` answers `400`), and TLS 1.3 encrypts the server's
/// `CertificateRequest`; a handshake of TLS 1.2 at most shows it in clear, so this one reads
/// the server's first flight as it arrives, before NIOSSL decrypts anything, and is closed
/// once it has. Nothing is sent but a ClientHello.
enum CertificateRequestProbe {
    /// What the server asked: the DER names of the CAs it takes (empty: any).
    struct Asked: Sendable {
        let issuers: [[UInt8]]
    }

    /// nil: the server did not ask (or did not answer as TLS 1.2).
    static func probe(
        host: String, port: Int, address: String?, configuration: TLSConfiguration, timeout: TimeAmount
    ) async -> Asked? {
        var configuration = configuration
        configuration.maximumTLSVersion = .tlsv12
        configuration.certificateVerification = .none
        guard let context = try? NIOSSLContext(configuration: configuration) else { return nil }
        let serverName = TLSProbeConnection.serverName(host)
        let asked = try? await TLSProbeConnection.run(
            host: host, port: port, address: address, timeout: timeout, onTimeout: { $0.succeed(nil) }
        ) { (channel, done: EventLoopPromise<Asked?>) in
            try channel.pipeline.syncOperations.addHandler(FlightReader(promise: done))
            try channel.pipeline.syncOperations.addHandler(
                try NIOSSLClientHandler(context: context, serverHostname: serverName))
        }
        return asked ?? nil
    }

    /// Reads the TLS records the server sends until its first flight ends (`ServerHelloDone`),
    /// passing every byte on unchanged.
    private final class FlightReader: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let promise: EventLoopPromise<Asked?>
        private var records: [UInt8] = []
        private var handshake: [UInt8] = []
        private var decided = false
        /// A first flight is a few KiB; more is not one worth reading.
        private static let limit = 128 * 1024

        init(promise: EventLoopPromise<Asked?>) {
            self.promise = promise
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if !decided {
                let buffer = unwrapInboundIn(data)
                records += buffer.readableBytesView
                read()
            }
            context.fireChannelRead(data)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            decide(nil)
            context.fireErrorCaught(error)
        }

        func channelInactive(context: ChannelHandlerContext) {
            decide(nil)
            context.fireChannelInactive()
        }

        private func decide(_ asked: Asked?) {
            guard !decided else { return }
            decided = true
            records = []
            handshake = []
            promise.succeed(asked)
        }

        private func read() {
            guard records.count + handshake.count <= Self.limit else { return decide(nil) }
            // Records: type, version (2), length (2), then the fragment.
            while records.count >= 5 {
                let length = Int(records[3]) << 8 | Int(records[4])
                guard records.count >= 5 + length else { break }
                // Anything but a handshake record (an alert, ChangeCipherSpec) ends the flight.
                guard records[0] == 22 else { return decide(nil) }
                handshake += records[5..<(5 + length)]
                records.removeFirst(5 + length)
            }
            // Messages: type, length (3), then the body.
            while handshake.count >= 4 {
                let length = Int(handshake[1]) << 16 | Int(handshake[2]) << 8 | Int(handshake[3])
                guard handshake.count >= 4 + length else { return }
                let type = handshake[0]
                let body = Array(handshake[4..<(4 + length)])
                handshake.removeFirst(4 + length)
                switch type {
                case 13: return decide(Asked(issuers: Self.issuers(in: body) ?? []))
                case 14: return decide(nil)
                default: continue
                }
            }
        }

        /// TLS 1.2's `CertificateRequest` (RFC 5246, 7.4.4): certificate types, signature
        /// algorithms, then the distinguished names, each with a two-byte length.
        private static func issuers(in body: [UInt8]) -> [[UInt8]]? {
            var at = 0
            func take(_ count: Int) -> ArraySlice<UInt8>? {
                guard count >= 0, at + count <= body.count else { return nil }
                defer { at += count }
                return body[at..<(at + count)]
            }
            func length(_ bytes: Int) -> Int? {
                take(bytes).map { $0.reduce(0) { $0 << 8 | Int($1) } }
            }
            guard let types = length(1), take(types) != nil, let algorithms = length(2), take(algorithms) != nil,
                let total = length(2), let list = take(total)
            else { return nil }
            var names: [[UInt8]] = []
            var rest = Array(list)
            while rest.count >= 2 {
                let size = Int(rest[0]) << 8 | Int(rest[1])
                guard rest.count >= 2 + size else { return nil }
                names.append(Array(rest[2..<(2 + size)]))
                rest.removeFirst(2 + size)
            }
            return names
        }
    }
}
