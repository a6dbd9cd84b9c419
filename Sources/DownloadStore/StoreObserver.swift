import DownloadModel
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
        var write: Pending
        var failed: [@Sendable (StoreError) -> Void]
    }

    /// A save is kept as what to write until the batch ends, so that a later save of the same
    /// task in the batch can take its place (`merged`); other writes are made when queued.
    private enum Pending: Sendable {
        case made(StoreWrite)
        case save(DownloadTaskRecord, options: Bool, mayUseReserve: Bool, sessionIdle: Bool)

        /// A save that only records what the task is now: a later save of the task writes all
        /// of it again. Not so a task's end (it counts towards its session's completion call)
        /// or a save that finds its session idle (it writes the call due).
        var isPlainSave: Bool {
            guard case .save(let record, _, _, let sessionIdle) = self else { return false }
            return !sessionIdle && !record.state.isTerminal
        }
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
            batch.withLockedValue {
                $0.append(Queued(what: what, id: id, write: .made(write), failed: failed.map { [$0] } ?? []))
            }
        } catch {
            failed?(failure(what, id, error))
        }
    }

    /// Queues a save of the task as `record` says it is now (made when the batch ends).
    private func save(
        _ what: String, _ record: DownloadTaskRecord, options: Bool = false, mayUseReserve: Bool = true,
        sessionIdle: Bool = false,
        failed: (@Sendable (StoreError) -> Void)? = nil
    ) {
        let save = Pending.save(record, options: options, mayUseReserve: mayUseReserve, sessionIdle: sessionIdle)
        batch.withLockedValue {
            $0.append(Queued(what: what, id: record.id, write: save, failed: failed.map { [$0] } ?? []))
        }
    }

    /// The batch without the plain saves that a later save of the same task overwrites (every
    /// save writes the whole row): a task's start, response and first checkpoint usually come in
    /// one batch, three saves of which one is written. The later save takes over what the
    /// dropped one needed: its options are written if either's changed, it may use the reserve
    /// if either may, and its failure is reported to both. An insert or a delete of the task in
    /// between keeps what comes before it.
    private static func merged(_ queued: [Queued]) -> [Queued] {
        var kept: [Queued] = []
        kept.reserveCapacity(queued.count)
        var laterSave: [UInt64: Int] = [:]  // id → index in `kept` (which is built backwards)
        for item in queued.reversed() {
            if item.write.isPlainSave, let index = laterSave[item.id],
                case .save(let record, let options, let mayUseReserve, let sessionIdle) = kept[index].write,
                case .save(_, let earlierOptions, let earlierReserve, _) = item.write
            {
                kept[index].write = .save(
                    record, options: options || earlierOptions, mayUseReserve: mayUseReserve || earlierReserve,
                    sessionIdle: sessionIdle
                )
                kept[index].failed += item.failed
                continue
            }
            if case .save = item.write {
                laterSave[item.id] = kept.count
            } else {
                laterSave[item.id] = nil
            }
            kept.append(item)
        }
        return kept.reversed()
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
        var writes: [(Queued, StoreWrite)] = []
        writes.reserveCapacity(queued.count)
        for item in StoreObserver.merged(queued) {
            switch item.write {
            case .made(let write):
                writes.append((item, write))
            case .save(let record, let options, let mayUseReserve, let sessionIdle):
                do {
                    writes.append(
                        (
                            item,
                            try store.saving(
                                record, options: options, mayUseReserve: mayUseReserve, sessionIdle: sessionIdle)
                        ))
                } catch {
                    report(item, error)
                }
            }
        }
        for ((item, _), result) in zip(writes, store.commit(writes.map(\.1))) {
            guard case .failure(let error) = result else { continue }
            report(item, error)
        }
    }

    /// A write of the batch failed (made or committed): recorded, and told to each write it stands for.
    private func report(_ item: Queued, _ error: any Error) {
        let failure = failure(item.what, item.id, error)
        for failed in item.failed { failed(failure) }
    }

    public func taskWasCreated(_ task: TaskSnapshot) {
        write("insert", task.id) { try store.inserting(task.record) }
    }

    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        let idle = !state.isActive && sessionIsIdle(task.record.sessionID)
        // A task that finished or was cancelled has had its secrets erased: its options are
        // written once more, so the store keeps none of them.
        save("save", task.record, options: state == .finished || state == .cancelled, sessionIdle: idle)
    }

    public func taskDidChangeOptions(_ task: TaskSnapshot) {
        save("save", task.record, options: true)
    }

    /// A new URL may come with a new origin for the caller's credentials (in the options).
    public func taskDidChangeURL(_ task: TaskSnapshot) {
        save("save", task.record, options: true)
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
        save(
            "save", task.record, mayUseReserve: false,
            failed: { [checkpointFailed] failure in
                if task.state.isActive { checkpointFailed(task, failure) }
            })
    }

    public func taskWasRemoved(_ task: TaskSnapshot) {
        write("delete", task.id) { store.deleting(task.id) }
    }

    public func groupWasCreated(_ group: DownloadGroupRecord) {
        write("insert group \(group.id) before", 0) { store.insertingGroup(group) }
    }

    public func groupWillPublish(_ group: DownloadGroupRecord) {
        write("record the publication of group \(group.id) before", 0) { store.publishingGroup(group.id) }
    }

    public func groupDidNotPublish(_ group: DownloadGroupRecord) {
        write("undo the publication of group \(group.id) after", 0) { store.publishingGroup(group.id, false) }
    }

    public func groupWasRemoved(_ group: DownloadGroupRecord) {
        write("delete group \(group.id) after", 0) { store.deletingGroup(group.id) }
    }
}
