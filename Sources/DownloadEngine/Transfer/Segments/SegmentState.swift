import NIOCore

/// A run's segmented state, behind `TransferRun.segmentState`'s lock: the phase (which carries
/// the ranges, the first claim and the workers), and what lasts the whole run.
struct SegmentState {
    /// Changed only through `move(to:)`.
    private(set) var phase = SegmentPhase.unsplit
    /// Connections this run may open: the places it holds.
    var connections: Int
    /// The URL and its mirrors, for a download with mirrors (made by its first range request;
    /// dropped sources stay dropped for the rest of the run).
    var mirrors: MirrorSet?
    var lastCheckpoint = NIODeadline.uptimeNanoseconds(0)
    /// Pieces that failed their hash in this run, and their bytes (fetched twice).
    var piecesRefetched = 0
    var bytesRefetched: Int64 = 0
    /// LAN peers (`lan_peers`): the lookup of this run (started once the task has a sha-256,
    /// cancelled at the run's end), the peers told of that no connection has taken up yet,
    /// and whether peers are done with for the run (their bytes spoiled a whole-file check). The
    /// bytes peers sent are `mirrors`' (`MirrorSet.peerBytes`).
    var peerLookup: Task<Void, Never>?
    var peersToJoin: [PeerOffer] = []
    var peersBanned = false

    init(connections: Int) {
        self.connections = connections
    }

    /// The ranges of the current split; nil otherwise.
    var table: SegmentTable? {
        if case .split(let split) = phase { return split.table }
        return nil
    }

    /// The connections of the attempt running now (after a split, until the attempt ends).
    var workers: SegmentWorkers? {
        if case .split(let split) = phase { return split.workers }
        return nil
    }

    /// A first request is out and no head has split the download yet.
    var isProbing: Bool {
        if case .probing = phase { return true }
        return false
    }

    /// The run fetches on one stream from now on.
    var settled: Bool {
        if case .settled = phase { return true }
        return false
    }

    /// The server `If-Range` goes to, when not the URL's own.
    var validatorSource: String? {
        switch phase {
        case .probing(let probe): return probe.validatorSource
        case .split(let split): return split.validatorSource
        case .unsplit, .settled: return nil
        }
    }

    /// The one way the phase changes. A step the run can never take is refused and the phase
    /// stays (as `TransferStateMachine` refuses an impossible event): nothing leaves `settled`
    /// (the rest of the run is one stream), only a split's ranges are let go (`unsplit`), and a
    /// split never goes back to probing.
    /// Returns whether it moved.
    @discardableResult
    mutating func move(to next: SegmentPhase) -> Bool {
        guard Self.allows(from: phase, to: next) else { return false }
        phase = next
        return true
    }

    static func allows(from: SegmentPhase, to next: SegmentPhase) -> Bool {
        switch (from, next) {
        case (.settled, .settled): return true
        case (.settled, _): return false
        case (.split, .unsplit), (.unsplit, .unsplit): return true
        case (_, .unsplit): return false
        // A split's ranges are what its checkpoints record: only letting them go (a new
        // version) may drop them. A probe after a split would leave a stop's checkpoint no
        // table, and the bytes held in every range recorded as one prefix: a file with a hole
        // (the mirrored pause-and-kill failure, Benchmarks/RESULTS.md).
        case (.split, .probing): return false
        default: return true
        }
    }

    /// A new version is coming: the split's ranges no longer describe the file.
    mutating func letGoOfRanges() {
        if case .split = phase { move(to: .unsplit) }
    }

    /// The attempt ended: its connections are gone, its ranges stay for the checkpoints.
    mutating func attemptEnded() {
        if case .split(var split) = phase {
            split.workers = nil
            move(to: .split(split))
        }
    }
}
