import NIOConcurrencyHelpers

/// The requests one run has out (several for a segmented download), each as what cancels it,
/// behind a lock of their own that runs nothing: a run's `RequestSender` keeps each request here
/// while it is out, and a stop (`stop`) takes them all and refuses any kept after it, so no
/// request outlives a stop. Each run has its own: what a run that ended kept is not the next one's.
final class RequestsOut: Sendable {
    private struct Held {
        var stopped = false
        var cancels: [ObjectIdentifier: @Sendable () -> Void] = [:]
    }

    private let held = NIOLockedValueBox(Held())

    /// Keeps `cancel` as what stops the request `id`; false, keeping nothing, once stopped: the
    /// caller cancels it then.
    func keep(_ id: ObjectIdentifier, cancel: @escaping @Sendable () -> Void) -> Bool {
        held.withLockedValue { held in
            guard !held.stopped else { return false }
            held.cancels[id] = cancel
            return true
        }
    }

    /// Whether the run was stopped: no request goes any more.
    var isStopped: Bool { held.withLockedValue { $0.stopped } }

    /// The request `id` ended: nothing to cancel any more.
    func forget(_ id: ObjectIdentifier) {
        _ = held.withLockedValue { $0.cancels.removeValue(forKey: id) }
    }

    /// What cancels each request out now, to be called after the lock by the caller (the end of
    /// a segmented attempt); requests may still be kept after it.
    var cancels: [@Sendable () -> Void] { held.withLockedValue { Array($0.cancels.values) } }

    /// Stops: no request is kept from now on; returns what cancels each one out now, to be called
    /// by the caller.
    func stop() -> [@Sendable () -> Void] {
        held.withLockedValue { held in
            held.stopped = true
            return Array(held.cancels.values)
        }
    }
}
