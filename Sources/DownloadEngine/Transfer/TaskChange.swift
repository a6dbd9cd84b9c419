import DownloadModel
import FileIdentities
import Metalink

/// What a run tells its owner about its task, as a value: the owner applies it in one `switch`
/// (`SessionManager.apply`), in the task's event order, and turns it into observer events; what
/// each change does to the task is written once, in `TaskChange.step` (Session/). A run never
/// reaches the task's locked state to change it, and never queues an event itself.
///
/// The first cases change the task (its record, its counters, its state); the last ones ask the
/// scheduler for places, and change nothing of the task.
enum TaskChange: Sendable {
    // MARK: The run

    /// A run began transferring: the manager reaches it through its handle from now on.
    case running(any RunHandle)
    /// The run ended: its handle is let go (only its own: a later run may have handed over its own).
    case runEnded(any RunHandle)

    // MARK: Checkpoints and what a response taught

    /// The partial file was opened or made: its identity recorded (a checkpoint), unless it is
    /// the one recorded.
    case fileOpened(FileIdentity)
    /// A download's response head decided to write its body (`ResponseDecision.write`).
    case responseReceived(ResponseHead)
    /// The task followed a Metalink document: its file became the download.
    case followedDocument(FollowedDocument)
    /// Everything before the offset is fsynced: recorded, only forward and never past the bytes
    /// written (a sync that finishes late never takes back what is recorded); not for a segmented
    /// download, whose checkpoints are `durableRanges`.
    case durable(upTo: Int64)
    /// A segmented download's checkpoint: everything of `length` bytes outside `remaining` is fsynced.
    case durableRanges(remaining: [ByteRange], length: Int64)
    /// The whole file is fsynced and checked (a file of an atomic group, before it waits for the
    /// others): held whole, so a restart asks the server for nothing more.
    case durableWhole(length: Int64)
    /// Durable progress taken back (after the truncation it describes): recorded only when it
    /// takes back something recorded.
    case reset(Reset)
    /// An upload's request that may not go twice went out whole: recorded before its answer can come.
    case sentWhole
    /// An upload's answer came: what was sent is settled (saved with the next change).
    case answered
    /// A resumable upload's server confirmed `offset`, with what is known of its resource.
    case confirmed(Int64, ResumableUpload)
    /// The reply's body went to the observers with the ending's snapshot: not kept in memory.
    case replyBodyDelivered
    /// The run's position is `Int64` from now on (a retry from the durable offset, a recovery,
    /// an upload's attempt from its start, the ranges all in): no event, the next progress says it.
    case position(Int64)
    /// The file the caller handed over is let go (an upload is done with it).
    case sourceReleased
    /// One request ended, as it went (`GetMetrics`); `source`: the URL or mirror its bytes count for.
    case transaction(TransactionMetrics, source: String)

    // MARK: Transitions

    /// A retrying task goes back to running before its next attempt.
    case resumed
    /// A running task waits out a back-off: it says why (as BITS's transient error does).
    case retrying(DownloadError)
    /// A download's file is published at `at`.
    case finished(at: String, length: Int64)
    /// A conditional download's 304: finished with nothing written, the destination untouched.
    case notModified
    /// An upload's final answer came (2xx), its reply placed at `reply` when it was asked for.
    case uploaded(UploadDelegate.Result, length: Int64, reply: String?, bodyKept: Bool)
    /// A download failed for good: it keeps what is durable, and resume data when it can go on.
    case failed(DownloadError)
    /// An upload failed for good, with the server's final answer when there was one.
    case uploadFailed(DownloadError, UploadDelegate.Result?)
    /// A stop took effect: the task goes where the stop leads (`StopReason.stoppedState`);
    /// `keepsUnconfirmed` false (an upload) takes the counters back to what is durable.
    case stopped(DownloadTask.StopReason, keepsUnconfirmed: Bool)

    // MARK: Places (the scheduler's; the task's state does not change)

    /// A background run gives way to other traffic, or no longer does (`WaitingFor.yielding`).
    case yielding(Bool)
    /// The response has little left to fetch: the task stops counting as a transfer.
    case short
    /// The run may use this many places from now on (granted as they free).
    case wantsConnections(Int)
    /// One connection of the run has no source to fetch from: its place goes back for good.
    case placeNotNeeded
    /// The run fetches on one stream from now on: all but one of its places go back.
    case oneStream
    /// The run can take more connections now: places that freed may be offered to it.
    case mayTakeMore

    /// What a response head that will write its body says of the file.
    struct ResponseHead: Sendable {
        var status: Int
        var url: String
        /// Where its body starts in the file; `truncate`: the file was emptied for it.
        var offset: Int64
        var truncate: Bool
        var expectedLength: Int64
        var validator: String?
        /// Its `Last-Modified` (Unix seconds), when it gave one that parses.
        var lastModified: Int64?
        /// Mirrors and the file's digest it named (Metalink/HTTP), new to the task.
        var mirrors: [String]
        var checksum: Checksum?
        /// Its `Content-Disposition`: the name the server suggests, worked out only when the
        /// file is not named already (`HTTPHeaderRules.fileName`, with `url`).
        var contentDisposition: String?
    }

    /// The file of a Metalink document fetched from `document` that the task follows.
    struct FollowedDocument: Sendable {
        var document: String
        var file: MetalinkDocument.File
        /// Its URLs the task may go to, `primary` (the first) its URL from now on.
        var urls: [String]
        var primary: String
        var pieces: PieceHashes?
        /// The group it is the first file of, when the document names several, and its name.
        var group: UInt64
        var name: String?

        /// The task's options once it follows the file (`TransferRun.options`); the caller's
        /// credentials stay with `given`, the URL they came with.
        func options(_ base: DownloadOptions, given: String) -> DownloadOptions {
            TransferRun.options(
                base, following: file, urls: urls, primary: primary, pieces: pieces, document: document, given: given)
        }
    }

    enum Reset: Sendable {
        /// What is durable (the offset, the ranges): the partial file was emptied for the new
        /// version a response is bringing, whose head already recorded its validator and length.
        case durableBytes
        /// The version too (validator, length, bytes written, the ranges being fetched): the
        /// next request starts from zero.
        case version
    }
}
