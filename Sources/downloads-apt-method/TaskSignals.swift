import DBus
import DownloadsAPI
import NIOConcurrencyHelpers

/// The service's signals about this method's tasks, handed to whoever waits for each task. A
/// task's first signals may come before `StartAt` returns its path (a small file is done at
/// once): they are kept until its waiter comes, the last 32 of at most 256 tasks (the end is the
/// last signal; the signals of the caller's other tasks may come too and must not pile up: one
/// is let go for a new one). A signal lost so is made good by `AptMethodRun`'s look at the task.
/// What a task's `PropertiesChanged` said as it finished is kept too (`ending`): apt's answer
/// needs the server's status and `Last-Modified`, which then cost no call.
final class TaskSignals: Sendable {
    /// A finished task's `ResponseStatus` and `LastModified`.
    struct Ending: Sendable {
        var responseStatus: UInt32
        var lastModified: Int64
    }

    private struct State {
        var waiters: [ObjectPath: AsyncStream<ManagerSignal>.Continuation] = [:]
        var early: [ObjectPath: [ManagerSignal]] = [:]
        var endings: [ObjectPath: Ending] = [:]
    }

    private let state = NIOLockedValueBox(State())

    func deliver(_ signal: ManagerSignal) {
        guard let task = signal.task else { return }
        state.withLockedValue { state in
            if let waiter = state.waiters[task] {
                waiter.yield(signal)
            } else {
                Self.makeRoom(for: task, in: &state.early)
                state.early[task, default: []].append(signal)
                if state.early[task, default: []].count > 32 { state.early[task]?.removeFirst() }
            }
        }
    }

    /// A `PropertiesChanged` of task `task`: kept when it says the task finished (it comes before
    /// the task's `Finished`, from the same sender, so it is here when `Finished` is).
    func deliverProperties(_ task: ObjectPath, _ changed: [String: DBusValue]) {
        guard changed[TaskProperty.state.name]?.stringValue == "finished",
            let responseStatus = changed[TaskProperty.responseStatus.name]?.uint32Value,
            let lastModified = changed[TaskProperty.lastModified.name]?.int64Value
        else { return }
        let ending = Ending(responseStatus: responseStatus, lastModified: lastModified)
        state.withLockedValue { state in
            Self.makeRoom(for: task, in: &state.endings)
            state.endings[task] = ending
        }
    }

    /// What `task`'s properties said as it finished, if that came.
    func ending(_ task: ObjectPath) -> Ending? {
        state.withLockedValue { $0.endings[task] }
    }

    /// At most 256 tasks are kept: one is let go for a new one.
    private static func makeRoom<Kept>(for task: ObjectPath, in kept: inout [ObjectPath: Kept]) {
        if kept[task] == nil, kept.count >= 256, let any = kept.keys.first { kept.removeValue(forKey: any) }
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
            state.endings.removeValue(forKey: task)
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
