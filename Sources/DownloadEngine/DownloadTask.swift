import AsyncHTTPClient
import Dispatch
import NIOConcurrencyHelpers

/// One download: its record, its live counters and the handles that stop it. All mutable state
/// sits in one `State` behind one lock, and every state change goes through
/// `DownloadState.canTransition(to:)`, so concurrent pause/resume/cancel cannot corrupt it.
final class DownloadTask: Sendable {
    enum StopReason: Sendable, Equatable {
        case pause, cancel, shutdown
    }

    struct State {
        var record: DownloadTaskRecord
        var bytesWritten: Int64
        var runner: Task<Void, Never>?
        var request: HTTPClient.Task<TransferDelegate.Result>?
        var stopReason: StopReason?
        /// Bumped when the partial file restarts from zero: checkpoints of an older epoch are stale.
        var epoch = 0
    }

    let id: UInt64
    let state: NIOLockedValueBox<State>
    /// Held while a state change is made and reported, so observers see one task's changes in
    /// the order they happened even when two threads change it (see `SessionManager.move`).
    let eventOrder = NIOLock()
    /// fdatasync runs here, off the event loops, in order.
    let syncQueue: DispatchQueue

    init(record: DownloadTaskRecord) {
        id = record.id
        state = NIOLockedValueBox(State(record: record, bytesWritten: record.durableOffset))
        syncQueue = DispatchQueue(label: "download.sync.\(record.id)")
    }

    var snapshot: TaskSnapshot {
        state.withLockedValue { TaskSnapshot(record: $0.record, bytesWritten: $0.bytesWritten) }
    }

    var record: DownloadTaskRecord { state.withLockedValue { $0.record } }

    /// Moves to `next` if allowed; returns the snapshot after the change, or nil when refused.
    func transition(to next: DownloadState, _ change: (inout State) -> Void = { _ in }) -> TaskSnapshot? {
        state.withLockedValue { state in
            guard state.record.state.canTransition(to: next) else { return nil }
            state.record.state = next
            change(&state)
            return TaskSnapshot(record: state.record, bytesWritten: state.bytesWritten)
        }
    }

    @discardableResult
    func update(_ change: (inout State) -> Void) -> TaskSnapshot {
        state.withLockedValue { state in
            change(&state)
            return TaskSnapshot(record: state.record, bytesWritten: state.bytesWritten)
        }
    }

    /// Runs a blocking file operation on this task's sync queue, off the cooperative pool.
    func onSyncQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            syncQueue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
