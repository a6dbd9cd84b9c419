import Synchronization

/// The bandwidth a task's transfer may take now, in bytes a second (0: no limit): the lowest of
/// the task's own `max_bytes_per_second`, a background transfer's pace (`BackgroundPacer`) and
/// its share of its group's limit. One per task, made with its run state; the manager sets the
/// own limit and the group's share, the run its pace, and a run reads it per chunk with no lock
/// (three atomics: a chunk read between two stores takes the older or the newer value of each,
/// either a limit that held a moment ago).
final class RateLimit: Sendable {
    /// The task's own limit (`DownloadOptions.maxBytesPerSecond`), as a `ChangeOptions` leaves it.
    let own = Atomic<UInt64>(0)
    /// A background transfer's rate now; 0: not paced.
    let paced = Atomic<UInt64>(0)
    /// Its share of its group's bandwidth (the group's limit over its running files; 0: none).
    let share = Atomic<UInt64>(0)

    init(own: UInt64 = 0) {
        self.own.store(own, ordering: .relaxed)
    }

    /// The limit reads are paced to: the lowest that is set, or 0.
    var bytesPerSecond: UInt64 {
        [own.load(ordering: .relaxed), paced.load(ordering: .relaxed), share.load(ordering: .relaxed)]
            .filter { $0 > 0 }.min() ?? 0
    }
}
