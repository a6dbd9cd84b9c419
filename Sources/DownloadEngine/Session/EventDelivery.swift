import Dispatch
import DownloadModel
import NIOConcurrencyHelpers

/// Receives every event of the engine and routes it to the observers (D-Bus signals, the store,
/// the log). It owns no download state: `SessionManager` does.
///
/// Delivery: each event is appended to one queue of deliveries while the engine holds that
/// task's `eventOrder` lock (so the queue holds each task's changes in the order they happened),
/// and one serial dispatch queue delivers them later, outside every lock, in batches: whatever
/// is queued when a delivery starts is given to the first observer (the store), which is then
/// told the batch ended (`eventsWereDelivered`, where the store commits the batch in one
/// transaction), then to the next observer, and so on. So an observer sees an event only once
/// the observers before it have taken the whole batch: after the store, only what is durable.
///
/// One queue for every task, not one per task (issue 24, Benchmarks/RESULTS.md): while it is
/// busy, posting to it wakes no thread, and many tasks' saves are one commit instead of one
/// each with a thread waiting for it. What it gives up: a slow observer call holds back every
/// task's events, not only its own (no observer blocks but the store, whose stalled disk holds
/// every task back anyway).
public final class EventDelivery: Sendable {
    typealias Call = @Sendable (any DownloadObserver) -> Void

    /// One queued delivery.
    private struct Delivery: Sendable {
        /// Run in queue order when its batch is taken: the calls to make of every observer
        /// (progress counters are read here, so a delivery reports the bytes of its moment).
        let calls: @Sendable () -> [Call]
        /// Run once every observer has taken the batch.
        var delivered: (@Sendable () -> Void)?
    }

    /// The observers and the deliveries waiting for them, behind one leaf lock.
    private struct Pending {
        var observers: [any DownloadObserver]
        var deliveries: [Delivery] = []
        /// A drain is queued or running: a new delivery joins it without waking anyone.
        var draining = false
    }

    private let pending: NIOLockedValueBox<Pending>
    /// Where the observers run, on libdispatch's overcommitting pool (the store's commit blocks it).
    private let queue = DispatchQueue(label: "org.example.Downloads.events")

    public init(observers: [any DownloadObserver] = []) {
        pending = NIOLockedValueBox(Pending(observers: observers))
    }

    public func add(_ observer: any DownloadObserver) {
        pending.withLockedValue { $0.observers.append(observer) }
    }

    // MARK: The queue

    private func enqueue(_ delivery: Delivery) {
        let start = pending.withLockedValue { pending -> Bool in
            pending.deliveries.append(delivery)
            guard !pending.draining else { return false }
            pending.draining = true
            return true
        }
        if start { queue.async { [self] in drain() } }
    }

    /// Delivers one batch: everything queued now. When more was queued meanwhile, the next batch
    /// is queued behind whatever else waits for this queue (a timed progress delivery), not run
    /// in a loop that could keep it waiting under load.
    private func drain() {
        let (batch, observers) = pending.withLockedValue { pending -> ([Delivery], [any DownloadObserver]) in
            defer { pending.deliveries = [] }
            return (pending.deliveries, pending.observers)
        }
        let calls = batch.flatMap { $0.calls() }
        if !calls.isEmpty {
            for observer in observers {
                for call in calls { call(observer) }
                observer.eventsWereDelivered()
            }
        }
        for delivery in batch { delivery.delivered?() }
        let more = pending.withLockedValue { pending -> Bool in
            pending.draining = !pending.deliveries.isEmpty
            return pending.draining
        }
        if more { queue.async { [self] in drain() } }
    }

    /// Queues `call` for every observer, after the progress made up to the event (`snapshot`):
    /// a delivery waiting for its interval never comes after a later event, and bytes that
    /// arrived after the event (before its delivery) are not reported before it. A checkpoint
    /// (`flushingProgress` false) is no visible change: the progress waits for its interval
    /// rather than go out once more per checkpoint.
    private func post(
        _ task: DownloadTask, _ snapshot: TaskSnapshot, flushingProgress: Bool = true, isStateChange: Bool = false,
        _ call: @escaping Call
    ) {
        enqueue(
            Delivery(calls: { [self] in
                guard flushingProgress, let progress = progress(task, upTo: snapshot, stateChangeFollows: isStateChange)
                else { return [call] }
                return [progress, call]
            }))
    }

    /// Returns once every event of `task` queued so far has been delivered to every observer.
    func eventsDelivered(after task: DownloadTask) async {
        await withCheckedContinuation { continuation in
            whenDelivered(after: task) { continuation.resume() }
        }
    }

    /// Calls `then` on the delivery queue once every event of `task` queued so far has been
    /// delivered to every observer: for a caller that goes on elsewhere without waiting here.
    func whenDelivered(after task: DownloadTask, _ then: @escaping @Sendable () -> Void) {
        // Under eventOrder: a change already visible has queued its events by then.
        task.inEventOrder {
            enqueue(Delivery(calls: { [] }, delivered: then))
        }
    }

    /// Returns once every event of each of `tasks` queued so far has been delivered: one wait
    /// for all (a group's ten thousand files), not one each. Each task's eventOrder is taken
    /// and let go first, so a change visible before has queued its events ahead of the wait's
    /// own delivery, and the queue is one for every task.
    func eventsDelivered(after tasks: [DownloadTask]) async {
        for task in tasks { task.inEventOrder {} }
        await withCheckedContinuation { continuation in
            enqueue(Delivery(calls: { [] }, delivered: { continuation.resume() }))
        }
    }

    // MARK: Task events (called under the task's eventOrder)

    func created(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot) { $0.taskWasCreated(snapshot) }
    }

    func stateChanged(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot, isStateChange: true) { $0.task(snapshot, didChangeState: snapshot.state) }
    }

    func optionsChanged(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot) { $0.taskDidChangeOptions(snapshot) }
    }

    func urlChanged(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot) { $0.taskDidChangeURL(snapshot) }
    }

    func waitingChanged(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot) { $0.task(snapshot, isWaitingFor: snapshot.waitingFor) }
    }

    func receivedResponse(_ task: DownloadTask, _ snapshot: TaskSnapshot, status: Int) {
        post(task, snapshot) { $0.task(snapshot, didReceiveResponse: status, expectedLength: snapshot.expectedLength) }
    }

    func checkpointed(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot, flushingProgress: false) { $0.taskDidCheckpoint(snapshot) }
    }

    func finished(_ task: DownloadTask, _ snapshot: TaskSnapshot, location: String) {
        post(task, snapshot) { $0.task(snapshot, didFinishDownloadingTo: location) }
    }

    func completed(_ task: DownloadTask, _ snapshot: TaskSnapshot, error: DownloadError, resumeData: [UInt8]?) {
        post(task, snapshot) { $0.task(snapshot, didCompleteWithError: error, resumeData: resumeData) }
    }

    func removed(_ task: DownloadTask, _ snapshot: TaskSnapshot) {
        post(task, snapshot) { $0.taskWasRemoved(snapshot) }
    }

    // MARK: Group events (in the queue's order, not a task's)

    func groupCreated(_ group: DownloadGroupRecord) {
        enqueue(Delivery(calls: { [{ $0.groupWasCreated(group) }] }))
    }

    /// Returns once every observer was given the decision (the store committed it).
    func groupWillPublish(_ group: DownloadGroupRecord) async {
        await withCheckedContinuation { continuation in
            enqueue(Delivery(calls: { [{ $0.groupWillPublish(group) }] }, delivered: { continuation.resume() }))
        }
    }

    /// Returns once every observer was told the decision is undone (the store committed it).
    func groupDidNotPublish(_ group: DownloadGroupRecord) async {
        await withCheckedContinuation { continuation in
            enqueue(Delivery(calls: { [{ $0.groupDidNotPublish(group) }] }, delivered: { continuation.resume() }))
        }
    }

    func groupRemoved(_ group: DownloadGroupRecord) {
        enqueue(Delivery(calls: { [{ $0.groupWasRemoved(group) }] }))
    }

    /// A task left `session` with nothing active: observers hear it after that task's events
    /// (queued before this).
    func sessionBecameIdle(_ session: SessionID) {
        enqueue(Delivery(calls: { [{ $0.sessionDidFinishEvents(session) }] }))
    }

    // MARK: Progress

    /// A run handed the bytes up to `position` to the writer (a download's) or the connection
    /// (an upload's): a progress delivery is queued `interval` nanoseconds after the last one,
    /// unless one is queued already (`DownloadTask.wrote(upTo:interval:)`: one task lock per chunk).
    func wrote(_ task: DownloadTask, upTo position: Int64, interval: UInt64) {
        if let deadline = task.wrote(upTo: position, interval: interval) { wroteData(task, at: deadline) }
    }

    /// Bytes arrived and the caller claimed the delivery (`DownloadTask.wrote(upTo:)`), to run at
    /// `deadline`. At most one progress delivery is queued per task at a time: it reads the newest
    /// counters when its batch is taken. Not under eventOrder: progress carries no state the store
    /// keeps; every other event delivers the progress before it first (`post`), so the order holds.
    private func wroteData(_ task: DownloadTask, at deadline: DispatchTime) {
        let delivery = Delivery(calls: { [self] in
            guard let (snapshot, delta) = task.takeProgress(endsQueued: true) else { return [] }
            return [progressCall(snapshot, delta)]
        })
        if deadline <= .now() {
            enqueue(delivery)
        } else {
            queue.asyncAfter(deadline: deadline) { [self] in enqueue(delivery) }
        }
    }

    /// Before an event: the progress up to its snapshot, if it is ahead of what was delivered.
    private func progress(_ task: DownloadTask, upTo event: TaskSnapshot, stateChangeFollows: Bool) -> Call? {
        guard let delta = task.takeProgress(upTo: event.bytesWritten) else { return nil }
        return progressCall(event, delta, stateChangeFollows: stateChangeFollows)
    }

    private func progressCall(_ snapshot: TaskSnapshot, _ delta: Int64, stateChangeFollows: Bool = false) -> Call {
        { observer in
            observer.task(
                snapshot, didWriteData: delta, totalBytesWritten: snapshot.bytesWritten,
                totalBytesExpected: snapshot.expectedLength,
                stateChangeFollows: stateChangeFollows
            )
        }
    }
}
