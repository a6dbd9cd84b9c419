import NIOConcurrencyHelpers

/// Receives every event of the engine and routes it to the observers (D-Bus signals, the store,
/// the log). It owns no download state: `SessionManager` does.
public final class SessionDelegate: Sendable {
    private let observers: NIOLockedValueBox<[any DownloadObserver]>

    public init(observers: [any DownloadObserver] = []) {
        self.observers = NIOLockedValueBox(observers)
    }

    public func add(_ observer: any DownloadObserver) {
        observers.withLockedValue { $0.append(observer) }
    }

    private var all: [any DownloadObserver] { observers.withLockedValue { $0 } }

    // MARK: Task events

    func stateChanged(_ task: TaskSnapshot) {
        for observer in all { observer.task(task, didChangeState: task.state) }
    }

    func receivedResponse(_ task: TaskSnapshot, status: Int) {
        for observer in all { observer.task(task, didReceiveResponse: status, expectedLength: task.expectedLength) }
    }

    func wroteData(_ task: TaskSnapshot, bytes: Int64) {
        for observer in all {
            observer.task(task, didWriteData: bytes, totalBytesWritten: task.bytesWritten, totalBytesExpected: task.expectedLength)
        }
    }

    func checkpointed(_ task: TaskSnapshot) {
        for observer in all { observer.taskDidCheckpoint(task) }
    }

    func finished(_ task: TaskSnapshot, location: String) {
        for observer in all { observer.task(task, didFinishDownloadingTo: location) }
    }

    func completed(_ task: TaskSnapshot, error: DownloadError, resumeData: [UInt8]?) {
        for observer in all { observer.task(task, didCompleteWithError: error, resumeData: resumeData) }
    }

    // MARK: Session events

    func sessionFinishedEvents(_ session: String) {
        for observer in all { observer.sessionDidFinishEvents(session) }
    }
}
