import NIOConcurrencyHelpers

/// The connections of one segmented attempt: those it starts with and those the scheduler
/// grants while it runs (places that freed up). Each connection claims ranges of the table
/// until none is left; once the last one has ended no more can be added, so a grant that comes
/// too late is refused and given back rather than left idle.
final class SegmentWorkers: Sendable {
    private struct State {
        /// Connections running, counted from their start to their end (including one started
        /// outside `run`: the first request of a download, which goes on as a connection).
        var live: Int
        var closed = false
    }

    private let state: NIOLockedValueBox<State>
    private let added: AsyncStream<Int>
    private let continuation: AsyncStream<Int>.Continuation

    /// `live`: the connections that count from now (each ends with `ended()`).
    init(live: Int) {
        state = NIOLockedValueBox(State(live: live))
        (added, continuation) = AsyncStream<Int>.makeStream()
        if live <= 0 {
            state.withLockedValue { $0.closed = true }
            continuation.finish()
        }
    }

    /// Starts `count` more connections; false once every connection has ended (the attempt is over).
    func add(_ count: Int) -> Bool {
        state.withLockedValue { state in
            guard !state.closed, count > 0 else { return false }
            state.live += count
            continuation.yield(count)
            return true
        }
    }

    /// A connection ended; the last one closes the attempt to new ones.
    func ended() {
        let last = state.withLockedValue { state -> Bool in
            state.live -= 1
            guard state.live <= 0 else { return false }
            state.closed = true
            return true
        }
        if last { continuation.finish() }
    }

    /// Runs `spawning` connections now and each one added later, each doing `work`; returns
    /// when every connection counted in `live` (those started elsewhere too) has ended.
    func run(spawning count: Int, _ work: @escaping @Sendable () async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            func spawn(_ connections: Int) {
                for _ in 0..<connections {
                    group.addTask {
                        await work()
                        self.ended()
                    }
                }
            }
            spawn(count)
            for await more in added { spawn(more) }
        }
    }
}
