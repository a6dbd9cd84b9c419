import DBus
import DownloadEngine
import Foundation

/// The service's view of the engine's events: persists them (the store), turns them into
/// signals (D-Bus) and logs; drives completion handlers when a session becomes idle.
/// Holds the service weakly (the engine's delegate outlives nothing; weak loads are thread-safe).
final class EngineObserver: DownloadObserver, @unchecked Sendable {
    private weak var service: DownloadsService?

    init(service: DownloadsService) {
        self.service = service
    }

    func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        guard let service, let key = SessionKey(engineKey: task.session) else { return }
        service.save(task.record)
        if state.isTerminal {
            do {
                try service.store.noteTaskEnded(owner: key.owner, session: key.name)
            } catch {
                service.logger.error("store: \(error)")
            }
        }
        service.flushProgress(task.id)
        let path = DownloadsService.path(of: task.id)
        service.emit("StateChanged", owner: key.owner, [.objectPath(path), .string(state.rawValue)])
        var changed: [String: DBusValue] = [:]
        for name in ["State", "BytesWritten", "BytesExpected", "Error", "ErrorMessage", "Destination"] {
            changed[name] = DownloadsService.property(name, of: task)
        }
        service.emitTaskProperties(task.id, changed)
    }

    func task(_ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64) {
        guard let service else { return }
        if let values = service.progress.offer(task: task.id, delta: bytesWritten, total: totalBytesWritten, expected: totalBytesExpected) {
            service.emitProgress(task.id, values)
        }
    }

    func taskDidCheckpoint(_ task: TaskSnapshot) {
        service?.save(task.record)
    }

    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {
        guard let service, let key = SessionKey(engineKey: task.session) else { return }
        service.flushProgress(task.id)
        service.emit("Finished", owner: key.owner, [.objectPath(DownloadsService.path(of: task.id)), .string(location)])
    }

    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {
        guard let service, let key = SessionKey(engineKey: task.session) else { return }
        service.flushProgress(task.id)
        service.emit("Failed", owner: key.owner, [
            .objectPath(DownloadsService.path(of: task.id)), .string(ServiceError.name(error.name)), .string(error.message),
            .bytes(resumeData ?? []),
        ])
    }

    func sessionDidFinishEvents(_ session: String) {
        guard let service, let key = SessionKey(engineKey: session) else { return }
        Task { await service.sessionBecameIdle(key) }
    }
}

extension DownloadsService {
    /// Persists what the engine knows of a task; a store failure is logged, never fatal.
    func save(_ record: DownloadTaskRecord) {
        var stored = record
        stored.session = SessionKey(engineKey: record.session)?.name ?? record.session
        do {
            try store.save(stored)
        } catch {
            logger.error("store: could not save task \(record.id): \(error)")
        }
    }
}
