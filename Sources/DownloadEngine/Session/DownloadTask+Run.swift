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

    /// The file the caller handed over by descriptor (`UploadAt`), while this daemon holds it.
    var heldSource: SourceFile? { withState { $0.source } }

    /// The requests the current run has out (`RequestsOut`: a stop, or the end of a segmented
    /// attempt, cancels every one kept), taken by the run when it starts: a new one for each run.
    var runRequests: RequestsOut { withState { $0.requests } }
}
