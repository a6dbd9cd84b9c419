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

    /// What its app answered to a challenge (credentials for the server or proxy that asked).
    var answered: AnsweredCredentials? { withState { $0.answered } }
    var trusted: TrustedServer? { withState { $0.trusted } }
    var answeredCertificate: AnsweredCertificate? { withState { $0.answeredCertificate } }

    /// The file the caller handed over by descriptor (`UploadAt`), while this daemon holds it.
    var heldSource: SourceFile? { withState { $0.source } }

    /// Keeps `cancel` as what stops the request `id` of the current run (a stop, or the end of a
    /// segmented attempt, calls every one kept); false, keeping nothing, when a stop came first:
    /// the caller cancels it then, so no request outlives a stop.
    func keepRequest(_ id: ObjectIdentifier, cancel: @escaping @Sendable () -> Void) -> Bool {
        withState { $0.requests }.keep(id, cancel: cancel)
    }

    /// The request `id` ended: nothing to cancel any more.
    func forgetRequest(_ id: ObjectIdentifier) {
        withState { $0.requests }.forget(id)
    }

    /// What cancels each request out now (called by the caller, after every lock).
    var requestCancels: [@Sendable () -> Void] { withState { $0.requests }.cancels }
}
