import DBus
import DownloadsAPI
import NIOConcurrencyHelpers

/// The service's signals about this method's tasks, handed to whoever waits for each task. A
/// task's first signals may come before `StartAt` returns its path (a small file is done at
/// once): they are kept until its waiter comes, the last 32 of at most 256 tasks (the end is the
/// last signal; the signals of the caller's other tasks may come too and must not pile up: one
/// is let go for a new one). A signal lost so is made good by `AptMethodRun`'s look at the task.
final class TaskSignals: Sendable {
    private struct State {
        var waiters: [ObjectPath: AsyncStream<ManagerSignal>.Continuation] = [:]
        var early: [ObjectPath: [ManagerSignal]] = [:]
    }

    private let state = NIOLockedValueBox(State())

    func deliver(_ signal: ManagerSignal) {
        guard let task = signal.task else { return }
        state.withLockedValue { state in
            if let waiter = state.waiters[task] {
                waiter.yield(signal)
            } else {
                if state.early[task] == nil, state.early.count >= 256, let any = state.early.keys.first {
                    state.early.removeValue(forKey: any)
                }
                state.early[task, default: []].append(signal)
                if state.early[task, default: []].count > 32 { state.early[task]?.removeFirst() }
            }
        }
    }

    /// The signals of `task`, those that came before first.
    func follow(_ task: ObjectPath) -> AsyncStream<ManagerSignal> {
        let (stream, sink) = AsyncStream.makeStream(of: ManagerSignal.self)
        state.withLockedValue { state in
            for signal in state.early.removeValue(forKey: task) ?? [] { sink.yield(signal) }
            state.waiters[task] = sink
        }
        return stream
    }

    func forget(_ task: ObjectPath) {
        state.withLockedValue { state in
            state.waiters.removeValue(forKey: task)?.finish()
            state.early.removeValue(forKey: task)
        }
    }

    /// The service left the bus: every waiter is told (its stream ends).
    func serviceGone() {
        state.withLockedValue { state in
            for waiter in state.waiters.values { waiter.finish() }
            state.waiters = [:]
        }
    }
}
