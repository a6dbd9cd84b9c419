import DownloadModel
import Logging
import Metalink
import NIOSSL

/// Everything a transfer run needs from whoever runs it, and nothing more: the run reaches its
/// owner only through this (as AsyncHTTPClient's `Transaction` reaches its pool only through
/// `HTTPRequestScheduler`). `SessionManager` is the owner in the daemon; `TransferRunTests`
/// build a run with a fake one, and an upload run is a second implementation beside it.
///
/// Every call may take the owner's locks, so none is made under a lock of the run's.
protocol TransferRunOwner: ConnectionLender, AnyObject {
    // MARK: Settings and the events' way out (the log: `ConnectionLender`)

    /// The service's settings (the network's part of them is `ConnectionLender.network`).
    var configuration: SessionManager.Configuration { get }
    /// Where the task's progress is queued (observers hear it later, in order with its changes).
    var events: EventDelivery { get }

    // MARK: The task

    /// Applies what the run reports of its task (`TaskChange.step`), in the task's event order,
    /// or asks the scheduler for places; the task's snapshot after it, or nil when the change was
    /// refused (a transition from a state that may not take it), changed nothing, or was the
    /// scheduler's. Leaving running or retrying frees the task's places in the same step.
    @discardableResult
    func apply(_ change: TaskChange, to task: DownloadTask) -> TaskSnapshot?
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
    /// A file was published without its origin attributes: the file system refused them (`code`).
    func originAttributesRefused(_ code: Int32, attribute: String, at path: String)
}

extension TransferRunOwner {
    var network: NetworkSettings { configuration.network }

    /// What a request of `task`'s run is sent with (`RequestContext`): the task's options and URL
    /// as `record` holds them now, its app's `answers` as the run took them, the run's `requests`;
    /// its metrics come back as a `TaskChange`.
    func requestContext(
        of task: DownloadTask, _ record: DownloadTaskRecord, answers: AppAnswers, requests: RequestsOut
    ) -> RequestContext {
        RequestContext(
            taskID: task.id, user: record.owner, options: record.options, taskURL: record.url, answers: answers,
            requests: requests,
            ended: { [weak self] transaction, source in
                self?.apply(.transaction(transaction, source: source), to: task)
            })
    }

    /// What turns the task's complete file into its destination, with its origin attributes.
    func finalizer(for task: DownloadTask) -> TransferFinalizer {
        TransferFinalizer(
            fileAccess: fileAccess(for: task),
            origin: TransferFinalizer.origin(of: task.record, configuration: configuration),
            attributesRefused: { [weak self] code, attribute, path in
                self?.originAttributesRefused(code, attribute: attribute, at: path)
            })
    }

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
