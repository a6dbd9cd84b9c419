import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI

/// Turns engine events into D-Bus signals and completion calls. Runs on the engine's delivery
/// queue, given each batch of events after the `StoreObserver` committed it. Holds the service
/// weakly (the service owns the engine, which owns this observer).
final class EngineObserver: DownloadObserver, @unchecked Sendable {
    private weak var service: DownloadsService?

    init(service: DownloadsService) {
        self.service = service
    }

    func taskWasCreated(_ task: TaskSnapshot) {
        guard let service, service.broadcasts(task.owner, app: task.record.app), service.sendsTaskSignals(task) else {
            return
        }
        // The properties of the event's snapshot, not read again per property from the engine.
        service.connection.announceAdded(
            DownloadsAPI.taskPath(task.id),
            interfaces: [DownloadsInterfaces.task.name: DownloadsService.properties(of: task)]
        )
    }

    func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        guard let service else { return }
        if service.sendsTaskSignals(task) {
            service.emit(
                .stateChanged(task: DownloadsAPI.taskPath(task.id), state: state.rawValue), owner: task.owner,
                app: task.record.app)
            service.emitTaskProperties(task, TaskProperty.changing)
        }
        service.groupEvent(task, ended: !state.isActive)
    }

    func taskDidChangeURL(_ task: TaskSnapshot) {
        guard let service, service.sendsTaskSignals(task) else { return }
        service.emitTaskProperties(task, [.url])
    }

    /// `Update` or `ResumeWithData` changed the task's options (or a download learned mirrors):
    /// the properties they show.
    func taskDidChangeOptions(_ task: TaskSnapshot) {
        guard let service, service.sendsTaskSignals(task) else { return }
        service.emitTaskProperties(task, TaskProperty.options)
    }

    /// An upload's checkpoint is the server's confirmation: `BytesConfirmed` changed.
    func taskDidCheckpoint(_ task: TaskSnapshot) {
        guard task.record.upload != nil, let service, service.sendsTaskSignals(task) else { return }
        service.emitTaskProperties(task, [.bytesConfirmed])
    }

    func task(_ task: TaskSnapshot, isWaitingFor reason: WaitingFor) {
        guard let service, service.sendsTaskSignals(task) else { return }
        service.emitTaskProperties(task, [.waitingFor, .question])
    }

    /// `Progress` always; the `BytesWritten`/`BytesExpected` change only when no state change
    /// follows at once (its `PropertiesChanged` carries the same totals: one message less per
    /// task at its end).
    func task(
        _ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64,
        stateChangeFollows: Bool
    ) {
        guard let service else { return }
        guard service.sendsTaskSignals(task) else { return service.groupEvent(task, ended: false) }
        service.emitProgress(
            task, delta: bytesWritten, total: totalBytesWritten, expected: totalBytesExpected,
            properties: !stateChangeFollows
        )
        service.groupEvent(task, ended: false)
    }

    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {
        guard let service, service.sendsTaskSignals(task) else { return }
        service.emit(
            .finished(task: DownloadsAPI.taskPath(task.id), location: location), owner: task.owner, app: task.record.app
        )
    }

    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {
        guard let service, service.sendsTaskSignals(task) else { return }
        let name = (DownloadsErrorName(rawValue: error.name) ?? .failed).fullName
        service.emit(
            .failed(
                task: DownloadsAPI.taskPath(task.id), errorName: name, message: error.message,
                resumeData: resumeData ?? []
            ), owner: task.owner, app: task.record.app)
    }

    func taskWasRemoved(_ task: TaskSnapshot) {
        guard let service else { return }
        if service.broadcasts(task.owner, app: task.record.app), service.sendsTaskSignals(task) {
            service.connection.announceRemoved(
                DownloadsAPI.taskPath(task.id), interfaces: [DownloadsInterfaces.task.name])
        }
    }

    func sessionDidFinishEvents(_ session: SessionID) {
        service?.sessionBecameIdle(session)
    }
}
