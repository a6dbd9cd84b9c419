import DBus
import DownloadsAPI
import DownloadsClient
import Synchronization

/// Whether anything worth another look happened since the last `take()`: a signal about a task,
/// or the service coming (back) onto the bus, started by someone's call after it exited when idle
/// (its new instance sends signals only to callers, so a follower must call it again). The
/// service leaving is nothing to look at: a call then would start it again.
final class ServiceChanges: Sendable {
    private let changed = Mutex(false)

    init(_ proxy: DownloadsProxy) async throws {
        try await proxy.connection.subscribe(
            MatchRule(sender: DownloadsAPI.busName, interface: DownloadsInterfaces.manager.name)
        ) { [weak self] _ in
            self?.changed.withLock { $0 = true }
        }
        _ = try await proxy.connection.onNameOwnerChanged { [weak self] name, _, new in
            guard name == DownloadsAPI.busName, !new.isEmpty else { return }
            self?.changed.withLock { $0 = true }
        }
    }

    /// True once after each change.
    func take() -> Bool {
        changed.withLock { value in
            defer { value = false }
            return value
        }
    }
}
