import DownloadEngine
import Logging

/// The one writer of engine state to the store: every task event that changes what a restart
/// must know is saved here, on the task's event queue (never on an event loop, never under an
/// engine lock). Added to the engine's delegate before any other observer, so the others see
/// only what is already durable.
public final class StoreObserver: DownloadObserver {
    private let store: DownloadStore
    private let logger: Logger

    public init(store: DownloadStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    private func write(_ what: String, _ id: UInt64, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            logger.error("store: could not \(what) task \(id): \(error)")
        }
    }

    public func taskWasCreated(_ task: TaskSnapshot) {
        write("insert", task.id) { try store.insertTask(task.record) }
    }

    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        write("save", task.id) { try store.save(task.record) }
    }

    public func taskDidChangeOptions(_ task: TaskSnapshot) {
        write("save", task.id) { try store.save(task.record) }
    }

    public func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64) {
        write("save", task.id) { try store.save(task.record) }
    }

    public func taskDidCheckpoint(_ task: TaskSnapshot) {
        write("save", task.id) { try store.save(task.record) }
    }

    public func taskWasRemoved(_ task: TaskSnapshot) {
        write("delete", task.id) { try store.deleteTask(task.id) }
    }
}
