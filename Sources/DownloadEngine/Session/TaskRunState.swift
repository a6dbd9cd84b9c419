import Dispatch
import DownloadModel
import UserFiles

/// What a task holds while it runs, or once it was asked something or handed a descriptor (its
/// run's handles and counters, its open question and answers): kept apart from the record so a
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
    /// A background transfer's rate now (bytes a second, `BackgroundPacer`); 0: not paced.
    var pacedRate: UInt64 = 0
    /// Its share of its group's bandwidth (the group's limit over its running files; 0: none).
    var groupShare: UInt64 = 0
    /// The descriptor the caller handed over (`StartAt`), while this daemon holds it: every
    /// file of the task is made below it. Not kept across a restart.
    var anchor: DescriptorAnchor? = nil
    /// The file an upload sends, when the caller handed it over by descriptor (`UploadAt`),
    /// while this daemon holds it. Not kept across a restart.
    var source: SourceFile? = nil
    /// The speed of what it transfers now (`Speed`), from the progress deliveries.
    var speedMeter: SpeedMeter = SpeedMeter()
    /// The question its app is asked now (queued, `WaitingFor` `app`); nil: none.
    var asking: Challenge? = nil
    /// Which question that is: an answer to an earlier one (before a Pause and a Resume) is
    /// not this one's.
    var question: UInt64 = 0
    /// The task's I/O queue (`DownloadTask.io`), once made.
    var io: DispatchQueue? = nil
    /// Answers the server refused for this task (the same question asked again after one).
    var refusedAnswers: Int = 0
    /// What its app answered (`AnsweredCredentials`): kept here, beside the record and never
    /// in it, so no snapshot carries it to an observer, the store or resume data.
    var answered: AnsweredCredentials? = nil
    /// The certificate its app trusted (`server-trust`), kept as `answered` is.
    var trusted: TrustedServer? = nil
    /// The client certificate its app gave (`client-certificate`) and the origin that asked for
    /// it, kept as `answered` is.
    var answeredCertificate: AnsweredCertificate? = nil
    /// Its app gave it a new URL (`link-expired`): the same question again is a refusal.
    var renewedLink: Bool = false

    /// Made with the counters where the task's record left them (its durable offset).
    init(bytesWritten: Int64) {
        self.bytesWritten = bytesWritten
        progressDelivered = bytesWritten
    }
}
