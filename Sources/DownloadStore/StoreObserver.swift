import DownloadEngine
import Logging
import NIOConcurrencyHelpers

/// The one writer of engine state to the store: every task event that changes what a restart
/// must know is saved here, on the task's event queue (never on an event loop, never under an
/// engine lock). Added to the engine's delegate before any other observer, so the others see
/// only what is already durable.
///
/// A write that fails (the state directory's disk is full even with its reserve released) is
/// kept per task for the service, which answers the call that caused it with the failure
/// (`takeFailure`), and a checkpoint that cannot be recorded is reported to `checkpointFailed`
/// (the service pauses that task rather than let it race on with nothing durable).
public final class StoreObserver: DownloadObserver {
    private let store: DownloadStore
    private let logger: Logger
    private let failures = NIOLockedValueBox([UInt64: StoreError]())
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

    @discardableResult
    private func write(_ what: String, _ id: UInt64, _ body: () throws -> Void) -> StoreError? {
        do {
            try body()
            return nil
        } catch {
            logger.error("store: could not \(what) task \(id): \(error)")
            let failure = error as? StoreError ?? StoreError("\(error)")
            failures.withLockedValue { $0[id] = failure }
            return failure
        }
    }

    public func taskWasCreated(_ task: TaskSnapshot) {
        write("insert", task.id) { try store.insertTask(task.record) }
    }

    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        let idle = !state.isActive && sessionIsIdle(task.record.sessionID)
        write("save", task.id) { try store.save(task.record, options: false, sessionIdle: idle) }
    }

    public func taskDidChangeOptions(_ task: TaskSnapshot) {
        write("save", task.id) { try store.save(task.record) }
    }

    public func taskDidChangeURL(_ task: TaskSnapshot) {
        write("save", task.id) { try store.save(task.record, options: false) }
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
        if let failure = write("save", task.id, { try store.save(task.record, options: false, mayUseReserve: false) }), task.state.isActive {
            checkpointFailed(task, failure)
        }
    }

    public func taskWasRemoved(_ task: TaskSnapshot) {
        write("delete", task.id) { try store.deleteTask(task.id) }
    }
}
