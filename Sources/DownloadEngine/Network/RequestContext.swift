import DownloadModel

/// What one request of a task is sent with, as its run gives it (Network/ reads no task): whose
/// it is, the task's options and URL as the run knows them, its app's answers, the run's requests
/// out (a stop cancels them all) and where the request's metrics go.
struct RequestContext: Sendable {
    /// The task's id, for the log.
    let taskID: UInt64
    /// The user it goes for (`--deny-network` binds every user but root).
    let user: UInt32
    let options: DownloadOptions
    /// The task's URL: a request's bytes count for it unless it went to one of `options.mirrors`.
    let taskURL: String
    let answers: AppAnswers
    /// The run's requests: each is kept there while it is out, and none goes once it is stopped.
    let requests: RequestsOut
    /// Takes one request as it went (`GetMetrics`) and the URL or mirror its bytes count for.
    let ended: @Sendable (TransactionMetrics, _ source: String) -> Void
}
