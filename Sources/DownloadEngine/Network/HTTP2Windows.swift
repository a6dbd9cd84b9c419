import AsyncHTTPClient
import NIOCore
import NIOHTTP2

/// The flow-control windows the service's HTTP/2 connections advertise: how many bytes a
/// server may send before it must wait for the service to say it read them, end to end, whatever
/// TCP does below. A download over HTTP/2 goes no faster than its stream's window per round trip.
///
/// AsyncHTTPClient keeps every stream's and the connection's window between 4 and 8 MiB (NIO
/// opens one again to its 8 MiB target once it fell below half of it) and has no setting for it:
/// about 5 MB in flight, 41 MB/s over a 100 ms link where curl took 185 (Benchmarks/RESULTS.md,
/// "HTTPS at curl's cost"). Each connection the service makes says, before its first stream:
/// - `SETTINGS_INITIAL_WINDOW_SIZE` = `stream`: a stream starts with that window, and its
///   `ReceiveWindow` gives back every byte its reader took (a `quantum` at a time), so the window
///   stays `stream` wide while the reader keeps up, and closes when the reader does not (a slow
///   disk holds a server back by at most a stream's window per stream);
/// - a `WINDOW_UPDATE` of the connection to `connection`, which the connection's `ReceiveWindow`
///   keeps there by giving back every byte that arrives: the streams' windows are what limit.
/// curl 7.88 advertises 32 MiB for each; nghttp2's defaults are 64 KiB.
enum HTTP2Windows {
    /// A stream's window: 16 MiB, 168 MB/s at most over a 100 ms round trip.
    static let stream = 16 << 20
    /// The connection's window, kept open: four streams' at full speed.
    static let connection = 64 << 20
    /// How many bytes are given back at once (at most a read's worth more).
    static let quantum = 1 << 20
    /// The largest part of a stream's body handed on at once (`StreamBody`), as a socket read of
    /// HTTP/1.1 is (`ReceiveBuffer.maximum`).
    static let part = ReceiveBuffer.maximum

    /// Adds the settings and the `ReceiveWindow`s to every HTTP/2 connection and stream
    /// `configuration`'s client makes, before (and as well as) the debug initializers already there.
    static func install(in configuration: inout HTTPClient.Configuration) {
        let connection = configuration.http2ConnectionDebugInitializer
        configuration.http2ConnectionDebugInitializer = { channel in
            open(channel).flatMap { connection?(channel) ?? channel.eventLoop.makeSucceededVoidFuture() }
        }
        let stream = configuration.http2StreamChannelDebugInitializer
        configuration.http2StreamChannelDebugInitializer = { channel in
            channel.eventLoop.makeCompletedFuture {
                // First what the reader took is counted, then the frames are joined (`StreamBody`).
                try channel.pipeline.syncOperations.addHandlers(
                    [ReceiveWindow.stream(quantum: quantum), StreamBody(largest: part)], position: .first)
            }.flatMap { stream?(channel) ?? channel.eventLoop.makeSucceededVoidFuture() }
        }
    }

    /// On the connection's event loop, before its first stream. A pipeline without AsyncHTTPClient's
    /// multiplexer (none is known) keeps NIO's windows: a connection is never refused for this.
    private static func open(_ channel: Channel) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            guard let multiplexer = try? sync.handler(type: HTTP2StreamMultiplexer.self),
                (try? sync.addHandler(ReceiveWindow.connection(quantum: quantum), position: .before(multiplexer)))
                    != nil
            else { return }
            let settings = HTTP2Setting(parameter: .initialWindowSize, value: stream)
            sync.write(
                NIOAny(HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([settings])))), promise: nil)
            // The connection's window is 65,535 until a WINDOW_UPDATE raises it.
            sync.writeAndFlush(
                NIOAny(
                    HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connection - 65_535))),
                promise: nil)
        }
    }
}
