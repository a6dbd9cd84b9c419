import AsyncHTTPClient
import NIOCore

/// How much a connection reads from its socket at once.
///
/// NIO's default (`AdaptiveRecvByteBufferAllocator`) grows a channel's reads to 64 KiB at most,
/// and AsyncHTTPClient has no setting for it. A body arriving faster than that is handed on in
/// 64 KiB parts, each one hand-off from the event loop to the file writer's queue. Reads that may
/// grow to `maximum` quarter those hand-offs: a 1 GiB download on loopback took 41 % less daemon
/// CPU, and 100 fast transfers at once 13 MiB more at their peak (Benchmarks/RESULTS.md, "Larger
/// reads…"). The allocator still starts small and shrinks again, so a connection that carries
/// small responses reads no more than before.
enum ReceiveBuffer {
    /// The largest read (curl reads at most 10 MiB, aria2 16 KiB; 256 KiB measured as good as 1 MiB).
    static let maximum = 256 << 10

    /// Sets the allocator on every connection `configuration`'s client makes, before (and as well
    /// as) the debug initializers already there.
    static func install(in configuration: inout HTTPClient.Configuration) {
        let http1 = configuration.http1_1ConnectionDebugInitializer
        configuration.http1_1ConnectionDebugInitializer = { channel in
            grow(channel).flatMap { http1?(channel) ?? channel.eventLoop.makeSucceededVoidFuture() }
        }
        let http2 = configuration.http2ConnectionDebugInitializer
        configuration.http2ConnectionDebugInitializer = { channel in
            grow(channel).flatMap { http2?(channel) ?? channel.eventLoop.makeSucceededVoidFuture() }
        }
    }

    private static func grow(_ channel: Channel) -> EventLoopFuture<Void> {
        channel.setOption(
            ChannelOptions.recvAllocator,
            value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: maximum))
    }
}
