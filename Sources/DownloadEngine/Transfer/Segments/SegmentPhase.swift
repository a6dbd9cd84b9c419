/// Where a run's segmenting stands (see TransferRun+Segments). Each case carries what that
/// phase has, so nothing of an earlier phase can pass for this one's (no flags to reset by hand).
enum SegmentPhase {
    /// Nothing split in this run yet, or the last split's ranges were let go (a new version).
    case unsplit
    /// The first request of an attempt is out, and its head may split the download.
    case probing(Probe)
    /// Split into ranges.
    case split(Split)
    /// One stream for the rest of the run: a segmented attempt restarted from zero.
    case settled

    struct Probe {
        /// The server whose answer will give the validator, when not the URL's own (the first
        /// request went to a mirror): only that one is sent `If-Range`.
        var validatorSource: String?
        /// The source of the first request (`MirrorSet` index): whose bytes its range holds.
        var source = 0
    }

    struct Split {
        /// The ranges (kept between attempts: the run's checkpoints record them).
        let table: SegmentTable
        /// The range the first request's response fills, while that connection fills it.
        var firstClaim: Int?
        /// The connections of the attempt running now (nil between attempts).
        var workers: SegmentWorkers?
        /// As `Probe.validatorSource`, for every range request of the run.
        var validatorSource: String?
    }
}
