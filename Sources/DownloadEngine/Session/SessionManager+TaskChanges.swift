import DownloadModel

/// The manager applying what its runs report (`TaskChange`): one `switch`, each change taken in
/// its task's event order (`TaskChange.step`) or answered by the scheduler.
extension SessionManager {
    @discardableResult
    func apply(_ change: TaskChange, to task: DownloadTask) -> TaskSnapshot? {
        switch change {
        case .short:
            transferIsShort(task)
        case .wantsConnections(let connections):
            wantConnections(task, connections)
        case .placeNotNeeded:
            placeNotNeeded(task)
        case .oneStream:
            settleOnOneStream(task)
        case .mayTakeMore:
            schedule()
        case .responseReceived(let head):
            let discarded = head.truncate ? task.withState { $0.bytesWritten } : 0
            let snapshot = take(change, on: task)
            if discarded > 0 {
                // Why a download went back to 0%: the journal says so (curl says "cannot resume").
                logger.notice(
                    "task \(task.id): the server sent the whole file (\(head.status)) instead of the rest from byte \(discarded): a new version, or ranges not offered; starting again from 0"
                )
            }
            return snapshot
        case .stopped(let reason, _):
            // Waiting for the network: queued again in the same step, to start when it allows it.
            return take(change, on: task) { [self] _, _, snapshot in
                if reason == .wait { state.withLockedValue { $0.scheduler.enqueue(snapshot.record) } }
            }
        case .failed(let error), .uploadFailed(let error, _):
            // A question its app may answer: the task waits for the answer instead.
            if let challenge = error.challenge, let snapshot = ask(task, challenge, error: error, failing: change) {
                return snapshot
            }
            let snapshot = take(change, on: task)
            // Its group may have to stop its other files.
            if task.record.group != 0 { groupFileFailed(task) }
            return snapshot
        case .running, .runEnded, .fileOpened, .followedDocument, .durable, .durableRanges, .durableWhole, .reset,
            .sentWhole, .answered,
            .confirmed, .replyBodyDelivered, .position, .sourceReleased, .transaction, .resumed, .retrying,
            .finished, .notModified,
            .uploaded, .yielding:
            return take(change, on: task)
        }
        return nil
    }

    /// Takes `change`'s step (`TaskChange.step`) on `task`: a transition through `move` (which
    /// frees places as the task leaves running), `more` queued after its events; the snapshot
    /// after it, or nil when refused or when nothing changed.
    private func take(
        _ change: TaskChange, on task: DownloadTask, then more: @escaping Events = { _, _, _ in }
    )
        -> TaskSnapshot?
    {
        guard let step = change.step(resumeDataKey: key) else { return nil }
        if let next = step.next {
            return move(
                task, to: next, from: step.allowed, { _ = step.change(&$0) },
                then: { delegate, task, snapshot in
                    step.events(delegate, task, snapshot)
                    more(delegate, task, snapshot)
                })
        }
        guard step.inEventOrder else {
            task.withState { _ = step.change(&$0) }
            return nil
        }
        return task.inEventOrder {
            guard let snapshot = task.withState({ state in step.change(&state) ? state.snapshot : nil }) else {
                return nil
            }
            step.events(delegate, task, snapshot)
            return snapshot
        }
    }
}
