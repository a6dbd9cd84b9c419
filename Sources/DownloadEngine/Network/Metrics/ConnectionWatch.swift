import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import DownloadModel

/// What a request learns of the connection AsyncHTTPClient's pool gave it (`ConnectionUse`:
/// reused or new, the peer, TLS, when a new one was ready), for its `TransactionMetrics`.
///
/// AsyncHTTPClient 1.37 tells a request nothing of its connection. It does hand each connection
/// it has made, and each h2 stream, to a configuration's debug initializers: there a
/// `ConnectionRecord` is taken of the connection and a `TransactionTagHandler` put in its
/// pipeline. A request that wants to know carries a tag (`header`, a number from `open`); the
/// handler takes the header out of the head before it is encoded, so it never leaves the
/// process, and notes the connection under that tag, which `close` hands back once the request
/// ended. A handler that cannot be placed fails the connection rather than let a tag out.
///
/// Tags are kept only between `open` and `close` (a lock that is a leaf), so a request that
/// never reached a connection leaves nothing behind.
final class ConnectionWatch: Sendable {
    /// The request header that carries a tag from `RequestSender` to `TransactionTagHandler`.
    static let header = HTTPFieldRules.serviceTagHeader

    private struct State {
        var next: UInt64 = 0
        var open: [UInt64: ConnectionUse?] = [:]
    }

    private let state = NIOLockedValueBox(State())

    init() {}

    /// A new tag, for one request's `header`.
    func open() -> String {
        state.withLockedValue { state in
            state.next += 1
            state.open[state.next] = .some(nil)
            return String(state.next)
        }
    }

    /// `tag`'s request went on a connection, as `use` says (dropped when the tag is closed).
    func note(_ tag: String, _ use: ConnectionUse) {
        guard let id = UInt64(tag) else { return }
        state.withLockedValue { state in
            guard state.open[id] != nil else { return }
            state.open[id] = .some(use)
        }
    }

    /// What became of `tag`'s request, forgetting the tag.
    func close(_ tag: String) -> ConnectionUse? {
        guard let id = UInt64(tag) else { return nil }
        return state.withLockedValue { $0.open.removeValue(forKey: id) } ?? nil
    }

    /// Tags open now (for tests).
    var openCount: Int { state.withLockedValue { $0.open.count } }

    /// Puts the watch into `configuration`'s debug initializers. `proxied`: the client's
    /// connections go through a proxy (their peer is the proxy, their readiness its too).
    func install(in configuration: inout HTTPClient.Configuration, proxied: Bool) {
        configuration.http1_1ConnectionDebugInitializer = { [self] channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                let encoder = try sync.handler(type: HTTPRequestEncoder.self)
                let record = ConnectionRecord(channel: channel, proxied: proxied)
                try sync.addHandler(TransactionTagHandler(watch: self, record: record), position: .after(encoder))
            }
        }
        configuration.http2ConnectionDebugInitializer = { channel in
            channel.eventLoop.makeCompletedFuture {
                let record = ConnectionRecord(channel: channel, proxied: proxied)
                try channel.pipeline.syncOperations.addHandler(ConnectionRecordHolder(record: record))
            }
        }
        configuration.http2StreamChannelDebugInitializer = { [self] stream in
            stream.eventLoop.makeCompletedFuture {
                let sync = stream.pipeline.syncOperations
                let codec = try sync.handler(type: HTTP2FramePayloadToHTTP1ClientCodec.self)
                // The stream's parent is its connection, on the same event loop.
                let holder = try? stream.parent?.pipeline.syncOperations.handler(type: ConnectionRecordHolder.self)
                try sync.addHandler(TransactionTagHandler(watch: self, record: holder?.record), position: .after(codec))
            }
        }
    }
}
