import DownloadModel

/// What a run (and the request sender) may read and keep of its task, as named operations of
/// Session/: no code outside Session/ runs a closure under the task's lock. The task's changes
/// a run reports go through `TaskChange`; these are the counters and handles a run keeps there
/// while it runs.
extension DownloadTask {
    /// Why the task is being stopped, while a stop is on its way (nil: none).
    var stopReason: StopReason? { withState { $0.stopReason } }

    /// Bytes received and handed to the file writer (an upload's: sent), ahead of the durable offset.
    var position: Int64 { withState { $0.bytesWritten } }

    /// What a run of the task starts with (`RunStart`), read once under the task's lock: the
    /// record, the I/O queue, this run's requests, the descriptor held, the bandwidth limit (its
    /// own part set from the record, as a run began with it).
    func runStart(answers: AppAnswers) -> RunStart {
        withState { state in
            let limit = state.limit
            limit.own.store(state.record.options.maxBytesPerSecond, ordering: .relaxed)
            return RunStart(
                record: state.record, io: state.io(of: id), requests: state.requests, held: state.source, limit: limit,
                answers: answers)
        }
    }
}
