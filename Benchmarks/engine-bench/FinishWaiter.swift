import DownloadEngine
import DownloadModel
import Foundation
import NIOConcurrencyHelpers

/// The engine's only observer in the small-files layers: resumes whoever waits for a task's end.
final class FinishWaiter: DownloadObserver, @unchecked Sendable {
    struct Failed: Error { let reason: String }
    private let waiting = NIOLockedValueBox<[UInt64: CheckedContinuation<Void, any Error>]>([:])
    private let ended = NIOLockedValueBox<[UInt64: (any Error)?]>([:])

    func download(_ manager: SessionManager, url: String, to target: String) async throws {
        var options = DownloadOptions()
        options.overwrite = true
        let task = try manager.create(
            DownloadRequest(
                owner: getuid(), session: "bench", url: url, destination: target, destinationIsDirectory: false,
                options: options
            ))
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let early = waiting.withLockedValue { waiting -> (any Error)?? in
                if let result = ended.withLockedValue({ $0.removeValue(forKey: task.id) }) { return .some(result) }
                waiting[task.id] = continuation
                return nil
            }
            if let early {
                if let error = early { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    private func end(_ id: UInt64, _ error: (any Error)?) {
        let continuation = waiting.withLockedValue { waiting in
            let continuation = waiting.removeValue(forKey: id)
            if continuation == nil { ended.withLockedValue { $0[id] = error } }
            return continuation
        }
        guard let continuation else { return }
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
    }

    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) { end(task.id, nil) }
    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {
        end(task.id, Failed(reason: "\(error)"))
    }
}
