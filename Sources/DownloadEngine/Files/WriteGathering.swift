import Synchronization

/// How many bytes a partial file's writer lets gather before it wakes its I/O queue: each wake
/// is a hand-off between the event loop and a queue's thread, so a stream gathering more is
/// written with fewer (the 1 GiB download: `Benchmarks/RESULTS.md`, "Writes gathered by how many
/// stream"). Gathered bytes are held in memory until written, so the most is spent only while few
/// files are written at once: `budget` shared by the writers alive, never less than `floor` (what
/// every writer gathered before) nor more than half the writer's high-water mark.
enum WriteGathering {
    static let budget = 16 << 20
    static let floor = 512 << 10

    /// Writers alive (one a running download).
    private static let writers = Atomic<Int>(0)

    static func writerMade() { writers.add(1, ordering: .relaxed) }
    static func writerGone() { writers.subtract(1, ordering: .relaxed) }

    /// The bytes to gather now, for a writer whose ceiling is `ceiling`.
    static func bytes(ceiling: Int) -> Int {
        bytes(ceiling: ceiling, writers: writers.load(ordering: .relaxed))
    }

    /// The bytes to gather for a writer whose ceiling is `ceiling` while `writers` are alive.
    static func bytes(ceiling: Int, writers: Int) -> Int {
        let share = budget / max(1, writers)
        return max(min(floor, ceiling), min(share, ceiling))
    }
}
