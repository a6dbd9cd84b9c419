import DownloadModel

/// The events of one step of a task, queued in its event order: given the delivery queue, the
/// task and its snapshot after the step.
typealias TaskEvents = (EventDelivery, DownloadTask, TaskSnapshot) -> Void

/// What one `TaskChange` does to its task, as its owner takes it in the task's event order: the
/// transition (if any), the change made under the task's lock, and the events that describe it.
struct TaskStep {
    /// The state it moves to; nil: the task changes without a transition.
    var next: DownloadState?
    /// With `next`: the states it may move from (nil: any that may go there).
    var allowed: Set<DownloadState>?
    /// The change, under the task's lock (bookkeeping only). Without a transition, false says
    /// nothing changed: no events.
    var change: (inout DownloadTask.State) -> Bool
    /// The events queued after the change (after `StateChanged`, with a transition).
    var events: TaskEvents
    /// Whether it is taken in the task's event order: false for a change no event describes
    /// (taken under the task's lock alone, so it may be made on an event loop).
    var inEventOrder = true

    /// A change without a transition.
    static func report(_ change: @escaping (inout DownloadTask.State) -> Bool, events: @escaping TaskEvents) -> Self {
        TaskStep(next: nil, allowed: nil, change: change, events: events)
    }

    /// A transition to `next`, whose `StateChanged` comes first.
    static func move(
        to next: DownloadState, from allowed: Set<DownloadState>? = nil,
        _ change: @escaping (inout DownloadTask.State) -> Void = { _ in },
        then events: @escaping TaskEvents = { _, _, _ in }
    ) -> Self {
        TaskStep(
            next: next, allowed: allowed,
            change: { state in
                change(&state)
                return true
            }, events: events)
    }

    /// A change no event describes.
    static func quiet(_ change: @escaping (inout DownloadTask.State) -> Void) -> Self {
        TaskStep(
            next: nil, allowed: nil,
            change: { state in
                change(&state)
                return false
            }, events: { _, _, _ in }, inEventOrder: false)
    }

    /// A checkpoint: the events are `Checkpointed`.
    static func checkpoint(_ change: @escaping (inout DownloadTask.State) -> Bool) -> Self {
        report(change, events: { delegate, task, snapshot in delegate.checkpointed(task, snapshot) })
    }
}
