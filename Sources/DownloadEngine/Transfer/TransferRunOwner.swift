import Crypto
import DownloadModel
import Logging
import Metalink
import NIOSSL

/// The events of one step of a task, queued in its event order: given the delivery queue, the
/// task and its snapshot after the step.
typealias TaskEvents = (EventDelivery, DownloadTask, TaskSnapshot) -> Void

/// Everything a transfer run needs from whoever runs it, and nothing more: the run reaches its
/// owner only through this (as AsyncHTTPClient's `Transaction` reaches its pool only through
/// `HTTPRequestScheduler`). `SessionManager` is the owner in the daemon; `TransferRunTests`
/// build a run with a fake one, and an upload run is a second implementation beside it.
///
/// Every call may take the owner's locks, so none is made under a lock of the run's.
protocol TransferRunOwner: ConnectionLender, AnyObject {
    // MARK: Settings and the events' way out (the configuration and the log: `ConnectionLender`)

    /// Where the task's events are queued (observers hear them later, in order).
    var events: EventDelivery { get }
    /// The key resume data is sealed with.
    var resumeDataKey: SymmetricKey { get }

    // MARK: The task's state

    /// Moves the task to `next` (when it is in `allowed`, or any state that may go there) and
    /// queues its `StateChanged` and the events of `then` in one step; nil when the move is not
    /// allowed. Leaving running or retrying frees the task's places in the same step.
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, from allowed: Set<DownloadState>?,
        _ change: (inout DownloadTask.State) -> Void, then: TaskEvents
    ) -> TaskSnapshot?
    /// Changes the task without a transition and queues the events that describe the change.
    @discardableResult
    func report(_ task: DownloadTask, _ change: (inout DownloadTask.State) -> Void, events: TaskEvents) -> TaskSnapshot
    /// A background run gives way to other traffic, or no longer does (`WaitingFor.yielding`).
    func markYielding(_ task: DownloadTask, _ yielding: Bool)

    // MARK: Places and connections (the scheduler's)

    /// A run stopped to wait for the network: the task is queued again, to start when it may.
    func requeue(_ record: DownloadTaskRecord)
    /// The response has little left to fetch: the task stops counting as a transfer.
    func transferIsShort(_ task: DownloadTask)
    /// The run may use `connections` places from now on (granted as they free).
    func wantConnections(_ task: DownloadTask, _ connections: Int)
    /// One connection of the run has no source to fetch from: its place goes back for good.
    func placeNotNeeded(_ task: DownloadTask)
    /// The run fetches on one stream from now on: all but one of its places go back.
    func settleOnOneStream(_ task: DownloadTask)
    /// The run can take more connections now: places that freed may be offered to it.
    func offerPlaces()
    /// Changes whenever connections may work again (a wake-up, the network back): a back-off
    /// that sees it change ends early.
    var reconnectGeneration: UInt64 { get }

    // MARK: Groups

    /// Whether the task's file waits for its group's other files before it is published (an
    /// atomic group).
    func publishesWithGroup(_ task: DownloadTask) -> Bool
    /// The task's file is complete and durable: waits, holding no place, until the group placed
    /// every file (or the decision was recorded before a restart: the run places its own), or
    /// the run is stopped; throws `FileExists` when the file's name was taken (then no file of
    /// the group is published: those placed are moved back).
    func awaitPublication(of task: DownloadTask) async throws -> GroupPublication
    /// The task failed for good: its group may have to stop its other files.
    func groupFileFailed(_ task: DownloadTask)
    /// The task followed a Metalink document of several files: a group is made of them (the
    /// others new tasks queued beside it, their subdirectories made), the task its first file;
    /// returns the group's id for the task's record. Throws (nothing made) for a name that is not
    /// a relative path of plain names, or a file with no URL the task could go to.
    func makeGroup(of task: DownloadTask, from document: MetalinkDocument, at url: String) throws -> UInt64

    // MARK: Clients: `ConnectionLender`

    // MARK: Files

    /// The task's file access: its owner's, below its caller's descriptor when it has one.
    func fileAccess(for task: DownloadTask) -> any FileAccess
    /// Removes the task's partial file on its I/O queue.
    func removePartialFile(of task: DownloadTask) async
}

extension TransferRunOwner {
    /// A move that queues only its `StateChanged` (and whatever `change` sets).
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, from allowed: Set<DownloadState>? = nil,
        _ change: (inout DownloadTask.State) -> Void = { _ in }
    ) -> TaskSnapshot? {
        move(task, to: next, from: allowed, change, then: { _, _, _ in })
    }

    /// A move whose step queues `then`'s events too.
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, _ change: (inout DownloadTask.State) -> Void = { _ in },
        then: TaskEvents
    ) -> TaskSnapshot? {
        move(task, to: next, from: nil, change, then: then)
    }
}

extension TransferRunOwner {
    /// The one back-off of the engine (a download's retries and restarts, each connection of a
    /// segmented one, an upload's retries): `delay` seconds, ended early by a stop (which
    /// cancels the run's Task and so this wait), by `unless` (another connection ended the
    /// attempt), or when connections may work again (a wake-up, the network back). Returns
    /// whether the wait ran its course or was cut short by a wake-up (false: stopped or ended).
    @discardableResult
    func sitOut(_ delay: Double, task: DownloadTask, unless ended: @Sendable () -> Bool = { false }) async -> Bool {
        let generation = reconnectGeneration
        let end = ContinuousClock.now + .milliseconds(Int64(delay * 1000))
        while ContinuousClock.now < end {
            if Task.isCancelled || ended() { return false }
            if reconnectGeneration != generation {
                logger.info("task \(task.id): retrying now")
                return true
            }
            try? await Task.sleep(for: min(.milliseconds(200), end - ContinuousClock.now))
        }
        return !Task.isCancelled && !ended()
    }
}
