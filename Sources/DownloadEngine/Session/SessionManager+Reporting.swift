import DownloadModel
/// Transitions and events: every change of a task and its events go out as one step under the
/// task's event order.
extension SessionManager {
    typealias Events = TaskEvents

    /// Moves a task to `next` and queues its events (`StateChanged`, and in `then` the other
    /// events of the same step) as one step under the task's event order. Returns nil when the
    /// transition is not allowed.
    /// A task leaving running or retrying for a state without a transfer frees its place in the
    /// scheduler in the same step, so a run that is ending never holds a place a new run took.
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, from allowed: Set<DownloadState>? = nil,
        _ change: (inout DownloadTask.State) -> Void = { _ in }, then: Events = { _, _, _ in }
    ) -> TaskSnapshot? {
        move(task, to: next, from: allowed, provided: { _ in true }, change, then: then)
    }

    /// The same, when `provided`, asked of the scheduler in the same step before the transition, says yes.
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, from allowed: Set<DownloadState>?, provided: (Scheduler) -> Bool,
        _ change: (inout DownloadTask.State) -> Void, then: Events = { _, _, _ in }
    ) -> TaskSnapshot? {
        task.inEventOrder {
            let (conditions, allowedNow) = state.withLockedValue { ($0.scheduler.conditions, provided($0.scheduler)) }
            guard allowedNow,
                let (previous, snapshot) = task.transition(
                    to: next, from: allowed,
                    { state in
                        change(&state)
                        // A question is open only while the task waits queued for its answer.
                        if next != .queued { state.asking = nil }
                        state.wait(on: conditions)
                        // A task ended for good needs no credentials: none stay in memory or in the store.
                        if next == .finished || next == .cancelled { state.record.options.eraseSecrets() }
                    })
            else { return nil }
            if previous.holdsTransfer && !next.holdsTransfer {
                state.withLockedValue { $0.scheduler.remove(task.id) }
            }
            // An app's answer lasts while the task runs: after an end or a Pause, the next run
            // asks again (a wait for the network keeps it).
            if next.isTerminal || next == .paused, answersKept.load(ordering: .sequentiallyConsistent) {
                state.withLockedValue { table in
                    changeAnswers(in: &table) { $0.forget(task.id, in: snapshot.sessionID) }
                }
            }
            if previous.isActive != next.isActive {
                state.withLockedValue { state in
                    state.activeChanged(snapshot.sessionID, by: next.isActive ? 1 : -1)
                    state.activeChanged(group: snapshot.record.group, by: next.isActive ? 1 : -1)
                }
            }
            delegate.stateChanged(task, snapshot)
            then(delegate, task, snapshot)
            return snapshot
        }
    }

    /// Changes a task without a transition and queues the events that describe the change.
    @discardableResult
    func report(_ task: DownloadTask, _ change: (inout DownloadTask.State) -> Void, events: Events) -> TaskSnapshot {
        task.inEventOrder {
            let snapshot = task.update(change)
            events(delegate, task, snapshot)
            return snapshot
        }
    }

    /// After a task left the active states: observers hear (after its events) if its session
    /// has nothing left to do, once each time it runs dry. A run's end asks when the run has
    /// closed (its finish waited for its record), so a task that started in its place and
    /// finished meanwhile can find the session idle first: both ends then find it so, and the
    /// table's mark (`takeIdle`) lets only the first report it.
    func sessionMayBeIdle(_ session: SessionID) {
        guard state.withLockedValue({ $0.takeIdle(session) }) else { return }
        delegate.sessionBecameIdle(session)
    }
}
