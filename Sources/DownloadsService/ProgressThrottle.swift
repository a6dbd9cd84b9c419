import NIOConcurrencyHelpers

/// At most one Progress signal per task per interval; what is held back is merged and sent by
/// the next flush, and `flush(task:)` before every visible state change sends the last one.
final class ProgressThrottle: Sendable {
    struct Values: Equatable, Sendable {
        var delta: Int64
        var total: Int64
        var expected: Int64
    }

    private struct Entry {
        var lastEmit: ContinuousClock.Instant?
        var pending: Values?
    }

    private let interval: Duration
    private let entries = NIOLockedValueBox([UInt64: Entry]())

    init(interval: Duration) {
        self.interval = interval
    }

    /// Returns what to emit now, or nil when it is held back.
    func offer(task: UInt64, delta: Int64, total: Int64, expected: Int64, now: ContinuousClock.Instant = .now) -> Values? {
        entries.withLockedValue { entries in
            var entry = entries[task] ?? Entry()
            let merged = Values(delta: (entry.pending?.delta ?? 0) + delta, total: total, expected: expected)
            if let last = entry.lastEmit, now - last < interval {
                entry.pending = merged
                entries[task] = entry
                return nil
            }
            entry.lastEmit = now
            entry.pending = nil
            entries[task] = entry
            return merged
        }
    }

    /// The held-back values of one task (sent before its state changes).
    func flush(task: UInt64) -> Values? {
        entries.withLockedValue { entries in
            guard let pending = entries[task]?.pending else { return nil }
            entries[task]?.pending = nil
            entries[task]?.lastEmit = .now
            return pending
        }
    }

    /// Held-back values whose interval has passed.
    func due(now: ContinuousClock.Instant = .now) -> [(UInt64, Values)] {
        entries.withLockedValue { entries in
            var result: [(UInt64, Values)] = []
            for (task, entry) in entries {
                guard let pending = entry.pending, entry.lastEmit.map({ now - $0 >= interval }) ?? true else { continue }
                entries[task]?.pending = nil
                entries[task]?.lastEmit = now
                result.append((task, pending))
            }
            return result
        }
    }

    func forget(task: UInt64) {
        _ = entries.withLockedValue { $0.removeValue(forKey: task) }
    }
}
