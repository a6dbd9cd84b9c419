import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The HTTPS server that offers `ShareIndex`'s files to the local network on Passim's wire
/// (`ShareRequestHandler` answers each request). HTTP/1.1 (and 1.0), TLS with the daemon's own
/// self-signed `ShareKey`; files are opened through `open` (as their owner: the daemon passes its
/// file access) and read off the event loop.
public final class ShareServer: Sendable {
    /// Opens a shared file for reading, as its owner may; returns the descriptor.
    public typealias Opener = @Sendable (SharedFile) throws -> Int32

    private let channel: Channel
    /// The port it listens on: the one asked for when it was free, else one the kernel chose.
    public let port: Int

    /// Listens on `host`, on `preferredPort` if it is free (Passim's 27500 is the daemon's
    /// default), else on any port. A connection to a local address `accepts` refuses (the daemon:
    /// one of an interface that is not a LAN, `LANInterfaces`) is closed before TLS.
    public init(
        index: ShareIndex, key: ShareKey, budget: AddressBudget = AddressBudget(), host: String = "::",
        preferredPort: Int, clock: @escaping @Sendable () -> (wall: Int64, monotonic: Double) = ShareServer.now,
        accepts: @escaping @Sendable (String) -> Bool = { _ in true }, open: @escaping Opener
    ) throws {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(key.certificate)], privateKey: .privateKey(key.privateKey))
        tls.applicationProtocols = ["http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                if let local = channel.localAddress?.ipAddress, !accepts(local) { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        ShareRequestHandler(index: index, budget: budget, clock: clock, open: open))
                }
            }
        let bound: Channel
        do {
            bound = try bootstrap.bind(host: host, port: preferredPort).wait()
        } catch  where preferredPort != 0 {
            bound = try bootstrap.bind(host: host, port: 0).wait()
        }
        channel = bound
        port = bound.localAddress?.port ?? 0
    }

    /// Stops listening; answers under way are cut.
    public func stop() {
        try? channel.close().wait()
    }

    /// Unix seconds and a monotonic clock in seconds.
    public static let now: @Sendable () -> (wall: Int64, monotonic: Double) = {
        var wall = timespec()
        var monotonic = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_MONOTONIC, &monotonic)
        return (Int64(wall.tv_sec), Double(monotonic.tv_sec) + Double(monotonic.tv_nsec) / 1e9)
    }
}
