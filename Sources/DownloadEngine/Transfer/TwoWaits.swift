import NIOConcurrencyHelpers

/// Two things done on two queues that one step waits for (a file's sync and the delivery of its
/// task's events, see `TransferRun.syncedThenPublished`): `then` runs once, on the thread of the
/// second to be done, or at once with the first failure (the other's end is then ignored).
final class TwoWaits: Sendable {
    private enum State {
        case waiting(left: Int)
        case ended
    }

    private let state = NIOLockedValueBox(State.waiting(left: 2))
    private let then: @Sendable (Error?) -> Void

    init(then: @escaping @Sendable (Error?) -> Void) {
        self.then = then
    }

    /// One of the two is done.
    func done() {
        let last = state.withLockedValue { state -> Bool in
            guard case .waiting(let left) = state else { return false }
            state = left > 1 ? .waiting(left: left - 1) : .ended
            return left == 1
        }
        if last { then(nil) }
    }

    /// One of the two failed: `then` hears it now, unless it ran already.
    func failed(_ error: Error) {
        let first = state.withLockedValue { state -> Bool in
            guard case .waiting = state else { return false }
            state = .ended
            return true
        }
        if first { then(error) }
    }
}
