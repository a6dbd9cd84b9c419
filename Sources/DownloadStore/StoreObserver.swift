import DownloadEngine
import Logging
import NIOConcurrencyHelpers

/// The one writer of engine state to the store: every task event that changes what a restart
/// must know is saved here, on the engine's delivery queue (never on an event loop, never under
/// an engine lock). Added to the engine's delegate before any other observer. The writes of a
/// delivery batch are committed together, in one transaction, when the batch ends
/// (`eventsWereDelivered`), before any other observer is given it: the others see only what is
/// durable.
///
/// A write that fails (the state directory's disk is full even with its reserve released) is
/// kept per task for the service, which answers the call that caused it with the failure
/// (`takeFailure`), and a checkpoint that cannot be recorded is reported to `checkpointFailed`
/// (the service pauses that task rather than let it race on with nothing durable).
public final class StoreObserver: DownloadObserver {
    /// A write of the batch being delivered, and what its failure means.
    private struct Queued: Sendable {
        let what: String
        let id: UInt64
        let write: StoreWrite
        let failed: (@Sendable (StoreError) -> Void)?
    }

    private let store: DownloadStore
    private let logger: Logger
    private let failures = NIOLockedValueBox([UInt64: StoreError]())
    private let batch = NIOLockedValueBox([Queued]())
    private let checkpointFailed: @Sendable (TaskSnapshot, StoreError) -> Void
    private let sessionIsIdle: @Sendable (SessionID) -> Bool

    /// `sessionIsIdle`: whether the engine has nothing queued, running or retrying in a session
    /// (asked when a task stops being active, so its end and the completion call it makes due are
    /// one transaction).
    public init(
        store: DownloadStore, logger: Logger, sessionIsIdle: @escaping @Sendable (SessionID) -> Bool = { _ in false },
        checkpointFailed: @escaping @Sendable (TaskSnapshot, StoreError) -> Void = { _, _ in }
    ) {
        self.store = store
        self.logger = logger
        self.sessionIsIdle = sessionIsIdle
        self.checkpointFailed = checkpointFailed
    }

    /// The failed write of task `id` since the last call, if any (cleared).
    public func takeFailure(_ id: UInt64) -> StoreError? {
        failures.withLockedValue { $0.removeValue(forKey: id) }
    }

    /// Queues a write for the batch's commit (a write that cannot even be made fails now).
    private func write(
        _ what: String, _ id: UInt64, failed: (@Sendable (StoreError) -> Void)? = nil, _ make: () throws -> StoreWrite
    ) {
        do {
            let write = try make()
            batch.withLockedValue { $0.append(Queued(what: what, id: id, write: write, failed: failed)) }
        } catch {
            failed?(failure(what, id, error))
        }
    }

    private func failure(_ what: String, _ id: UInt64, _ error: any Error) -> StoreError {
        logger.error("store: could not \(what) task \(id): \(error)")
        let failure = error as? StoreError ?? StoreError("\(error)")
        failures.withLockedValue { $0[id] = failure }
        return failure
    }

    /// The batch ends: its writes are committed, in one transaction when they can be.
    public func eventsWereDelivered() {
        let queued = batch.withLockedValue { batch -> [Queued] in
            defer { batch = [] }
            return batch
        }
        guard !queued.isEmpty else { return }
        for (write, result) in zip(queued, store.commit(queued.map(\.write))) {
            guard case .failure(let error) = result else { continue }
            let failure = failure(write.what, write.id, error)
            write.failed?(failure)
        }
    }

    public func taskWasCreated(_ task: TaskSnapshot) {
        write("insert", task.id) { try store.inserting(task.record) }
    }

    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        let idle = !state.isActive && sessionIsIdle(task.record.sessionID)
        write("save", task.id) { try store.saving(task.record, options: false, sessionIdle: idle) }
    }

    public func taskDidChangeOptions(_ task: TaskSnapshot) {
        write("save", task.id) { try store.saving(task.record) }
    }

    public func taskDidChangeURL(_ task: TaskSnapshot) {
        write("save", task.id) { try store.saving(task.record, options: false) }
    }

    public func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64) {
        saveProgress(task)
    }

    public func taskDidCheckpoint(_ task: TaskSnapshot) {
        saveProgress(task)
    }

    /// A running task's progress (its response, its checkpoints): saved without the reserve,
    /// which is kept for the state change that follows when it cannot be.
    private func saveProgress(_ task: TaskSnapshot) {
        write("save", task.id, failed: { [checkpointFailed] failure in
            if task.state.isActive { checkpointFailed(task, failure) }
        }) { try store.saving(task.record, options: false, mayUseReserve: false) }
    }

    public func taskWasRemoved(_ task: TaskSnapshot) {
        write("delete", task.id) { store.deleting(task.id) }
    }
}
