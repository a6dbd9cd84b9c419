import Dispatch
import DownloadModel

/// What a run takes of its task when it starts, handed by whoever starts it (the manager's
/// `DownloadTask.runStart`, under the task's lock once): the record as it was then, the task's
/// I/O queue, the requests this run keeps out, the descriptor the caller handed over, the task's
/// bandwidth limit (which the manager and the pacer change while it runs) and its app's answers.
/// A run reads none of these from the task again.
struct RunStart: Sendable {
    let record: DownloadTaskRecord
    /// Every blocking call on the task's files runs here, in order (`DownloadTask.io`).
    let io: DispatchQueue
    /// The run's requests out (a stop cancels them all): a new one for each run.
    let requests: RequestsOut
    /// The file the caller handed over by descriptor (`UploadAt`), while this daemon holds it.
    let held: SourceFile?
    let limit: RateLimit
    /// What the task's app answered, taken when the run started (`AppAnswers`).
    let answers: AppAnswers
}
