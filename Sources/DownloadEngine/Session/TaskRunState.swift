import Dispatch
import DownloadModel
import UserFiles

/// What a task holds while it runs, or once it was asked something or handed a descriptor (its
/// run's handles and counters, its open question): kept apart from the record so a
/// hundred thousand queued tasks do not each carry it. Reached only through `DownloadTask.State`,
/// under the task's lock.
final class TaskRunState: @unchecked Sendable {
    /// `DownloadTask.State.bytesWritten` and `progressDelivered` once the task has this.
    var bytesWritten: Int64
    var progressDelivered: Int64
    var runner: Task<Void, Never>? = nil
    /// The requests the current run has out (a stop, or the end of a segmented attempt,
    /// cancels them all); a new one for each run.
    var requests = RequestsOut()
    var stopReason: DownloadTask.StopReason? = nil
    /// Which run `runner` is: a run that ended clears only its own handle.
    var runID: UInt64 = 0
    /// A progress delivery is queued and has not run yet.
    var progressQueued: Bool = false
    /// When the last progress delivery ran (`DispatchTime.uptimeNanoseconds`).
    var progressDeliveredAt: UInt64 = 0
    /// The run transferring now, for checkpoints asked from outside (before sleep) and the
    /// scheduler's places.
    var transfer: (any RunHandle)? = nil
    /// Its bandwidth limit now (its own, a background transfer's pace, its group's share): the
    /// run reads it per chunk without this lock (`RateLimit`).
    var limit: RateLimit
    /// The descriptor the caller handed over (`StartAt`'s directory, `UploadAt`'s file), while
    /// this daemon holds it. Not kept across a restart.
    var held: HeldDescriptor? = nil
    /// The speed of what it transfers now (`Speed`), from the progress deliveries.
    var speedMeter: SpeedMeter = SpeedMeter()
    /// The question its app is asked now (queued, `WaitingFor` `app`); nil: none. What its app
    /// answered is not the task's: `AnswerBook` keeps it per session and origin.
    var asking: AskedQuestion? = nil
    /// The task's I/O queue (`DownloadTask.io`), once made.
    var io: DispatchQueue? = nil

    /// Made with the counters where the task's record left them (its durable offset).
    init(bytesWritten: Int64, ownLimit: UInt64) {
        self.bytesWritten = bytesWritten
        progressDelivered = bytesWritten
        limit = RateLimit(own: ownLimit)
    }
}
