import DownloadModel
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
        /// The connections fetching now, oldest first (each from `seat()` to `leave`).
        var seats: [Seat] = []
    }

    /// One connection, as the scheduler may ask it to end (`retire`): the request it has out is
    /// cancelled (its range goes back to the table) and it claims nothing more.
    final class Seat: RequestHolder {
        private struct State {
            var cancel: (@Sendable () -> Void)?
            var retiring = false
        }

        private let state = NIOLockedValueBox(State())

        var isRetiring: Bool { state.withLockedValue { $0.retiring } }

        /// The request out now (nil: none); cancelled at once when the seat is retiring already.
        func holds(_ cancel: (@Sendable () -> Void)?) {
            let retiring = state.withLockedValue { state -> Bool in
                state.cancel = cancel
                return state.retiring
            }
            if retiring { cancel?() }
        }

        func retire() {
            let cancel = state.withLockedValue { state -> (@Sendable () -> Void)? in
                state.retiring = true
                return state.cancel
            }
            cancel?()
        }
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

    /// A connection begins fetching: its seat, until it leaves.
    func seat() -> Seat {
        let seat = Seat()
        state.withLockedValue { $0.seats.append(seat) }
        return seat
    }

    func leave(_ seat: Seat) {
        state.withLockedValue { $0.seats.removeAll { $0 === seat } }
    }

    /// Ends up to `count` connections, the newest first, keeping at least one; returns how many.
    func retire(_ count: Int) -> Int {
        let chosen = state.withLockedValue { state -> [Seat] in
            guard !state.closed else { return [] }
            let candidates = state.seats.dropFirst().filter { !$0.isRetiring }
            return Array(candidates.suffix(max(0, min(count, state.live - 1))))
        }
        for seat in chosen { seat.retire() }
        return chosen.count
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
