import NIOCore

/// Keeps an h2 connection's `ConnectionRecord` in its pipeline, where its streams (child
/// channels, made on the same event loop) find it. At the pipeline's end, after the stream
/// multiplexer: it passes on whatever reaches it and touches nothing.
final class ConnectionRecordHolder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    let record: ConnectionRecord

    init(record: ConnectionRecord) {
        self.record = record
    }
}

@available(*, unavailable)
extension ConnectionRecordHolder: Sendable {}
