import Dispatch
import NIOConcurrencyHelpers

/// Receives every event of the engine and routes it to the observers (D-Bus signals, the store,
/// the log). It owns no download state: `SessionManager` does.
///
/// Each event is put on the task's serial event queue while the engine holds that task's
/// `eventOrder` lock (so the queue's order is the order of the changes), and the observers run
/// later on that queue, outside every lock. Each task's queue runs on its own (libdispatch's
/// overcommitting pool), so a slow observer call delays only the task it is about.
public final class SessionDelegate: Sendable {
    private let observers: NIOLockedValueBox<[any DownloadObserver]>

    public init(observers: [any DownloadObserver] = []) {
        self.observers = NIOLockedValueBox(observers)
    }

    public func add(_ observer: any DownloadObserver) {
        observers.withLockedValue { $0.append(observer) }
    }

    private var all: [any DownloadObserver] { observers.withLockedValue { $0 } }

    /// Queues `body` for every observer, in order, on the task's event queue, after the progress
    /// made up to the event (`snapshot`): a delivery waiting for its interval never comes after a
    /// later event, and bytes that arrived after the event (before its turn on the queue) are
    /// not reported before it. A checkpoint (`flushingProgress` false) is no visible change: the
    /// progress waits for its interval rather than go out once more per checkpoint.
    private func post(
        _ task: DownloadTask, _ snapshot: TaskSnapshot, flushingProgress: Bool = true, isStateChange: Bool = false,
        _ body: @escaping @Sendable (any DownloadObserver) -> Void
    ) {
        task.events.async { [self] in
            if flushingProgress { deliverProgress(task, upTo: snapshot, stateChangeFollows: isStateChange) }
            for observer in all { body(observer) }
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

    /// Bytes arrived and the caller claimed the delivery (`DownloadTask.wrote(upTo:)`), to run at
    /// `deadline`. At most one progress delivery is queued per task at a time: it reads the newest
    /// counters when it runs. Not under eventOrder: progress carries no state the store keeps;
    /// every other event delivers the progress before it first (`post`), so the order holds.
    func wroteData(_ task: DownloadTask, at deadline: DispatchTime) {
        let deliver: @Sendable () -> Void = { [self] in deliverProgress(task, queued: true) }
        if deadline <= .now() {
            task.events.async(execute: deliver)
        } else {
            task.events.asyncAfter(deadline: deadline, execute: deliver)
        }
    }

    /// On the task's event queue: tells the observers the bytes written since the last delivery.
    /// `queued`: this is the delivery `wroteData` queued (another event's flush leaves it queued,
    /// so only one ever waits).
    private func deliverProgress(_ task: DownloadTask, queued: Bool) {
        guard let (snapshot, delta) = task.takeProgress(endsQueued: queued) else { return }
        tell(snapshot, delta)
    }

    /// Before an event: the progress up to its snapshot, if it is ahead of what was delivered.
    private func deliverProgress(_ task: DownloadTask, upTo event: TaskSnapshot, stateChangeFollows: Bool) {
        guard let delta = task.takeProgress(upTo: event.bytesWritten) else { return }
        tell(event, delta, stateChangeFollows: stateChangeFollows)
    }

    private func tell(_ snapshot: TaskSnapshot, _ delta: Int64, stateChangeFollows: Bool = false) {
        for observer in all {
            observer.task(
                snapshot, didWriteData: delta, totalBytesWritten: snapshot.bytesWritten, totalBytesExpected: snapshot.expectedLength,
                stateChangeFollows: stateChangeFollows
            )
        }
    }

    /// `task` left its session with nothing active: observers hear it on the task's queue,
    /// after the task's events.
    func sessionBecameIdle(_ task: DownloadTask, _ session: SessionID) {
        task.events.async { [self] in
            for observer in all { observer.sessionDidFinishEvents(session) }
        }
    }
}
