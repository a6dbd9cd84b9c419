import Crypto
@testable import DownloadEngine
@testable import DownloadModel
import Logging
import Metalink
import NIOConcurrencyHelpers
import NIOSSL

/// A transfer run's owner without a manager: no scheduler, no task table, no daemon. It moves the
/// task as the manager does (`DownloadTask.transition` under its event order), delivers events
/// to `observer` through a real `EventDelivery`, leases direct clients of a real `HTTPClients`,
/// writes files as this process, and writes down what the run asked of it.
final class FakeRunOwner: TransferRunOwner {
    let configuration: SessionManager.Configuration
    let logger = Logger(label: "test.fake-run-owner")
    let events: EventDelivery
    var resumeDataKey: SymmetricKey { SymmetricKey(data: [UInt8](repeating: 7, count: 32)) }
    let clients: HTTPClients
    private let requests = NIOLockedValueBox([String]())
    private let generation = NIOLockedValueBox<UInt64>(0)

    init(observer: any DownloadObserver, _ change: (inout SessionManager.Configuration) -> Void = { _ in }) {
        var configuration = SessionManager.Configuration()
        configuration.retry = RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.2, retryAfterCap: 2)
        configuration.checkpointBytes = 64 * 1024
        change(&configuration)
        self.configuration = configuration
        events = EventDelivery(observers: [observer])
        clients = HTTPClients(
            connectTimeout: configuration.connectTimeout, caFile: nil, connectionsPerHost: configuration.maxConnections
        )
    }

    /// What the run asked of its owner, in order (`offerPlaces` left out: it is asked often).
    var asked: [String] { requests.withLockedValue { $0 } }

    private func note(_ request: String) { requests.withLockedValue { $0.append(request) } }

    func shutdown() async { await clients.shutdown() }

    // MARK: TransferRunOwner

    func move(
        _ task: DownloadTask, to next: DownloadState, from allowed: Set<DownloadState>?,
        _ change: (inout DownloadTask.State) -> Void, then: TaskEvents
    ) -> TaskSnapshot? {
        task.inEventOrder {
            guard let (_, snapshot) = task.transition(to: next, from: allowed, change) else { return nil }
            events.stateChanged(task, snapshot)
            then(events, task, snapshot)
            return snapshot
        }
    }

    func report(_ task: DownloadTask, _ change: (inout DownloadTask.State) -> Void, events: TaskEvents) -> TaskSnapshot
    {
        task.inEventOrder {
            let snapshot = task.update(change)
            events(self.events, task, snapshot)
            return snapshot
        }
    }

    func markYielding(_ task: DownloadTask, _ yielding: Bool) { note("yielding \(yielding)") }
    func requeue(_ record: DownloadTaskRecord) { note("requeue") }
    func transferIsShort(_ task: DownloadTask) { note("short") }
    func wantConnections(_ task: DownloadTask, _ connections: Int) { note("want \(connections)") }
    func placeNotNeeded(_ task: DownloadTask) { note("place not needed") }
    func settleOnOneStream(_ task: DownloadTask) { note("one stream") }
    func offerPlaces() {}
    var reconnectGeneration: UInt64 { generation.withLockedValue { $0 } }

    func publishesWithGroup(_ task: DownloadTask) -> Bool { false }
    func awaitPublication(of task: DownloadTask) async throws -> GroupPublication { .publish }
    func groupFileFailed(_ task: DownloadTask) { note("group file failed") }
    func makeGroup(of task: DownloadTask, from document: MetalinkDocument, at url: String) throws -> UInt64 {
        throw DownloadError.invalidResponse("no groups here")
    }

    func lease(_ kind: HTTPClients.Kind, route: HTTPClients.Route) -> HTTPClients.Lease {
        note("lease \(route.proxy.map { "via \($0)" } ?? "direct")")
        return clients.lease(kind, route: route)
    }

    func release(_ lease: HTTPClients.Lease) { clients.release(lease) }
    var tlsConfiguration: TLSConfiguration { clients.tlsConfiguration }

    func fileAccess(for task: DownloadTask) -> any FileAccess { DirectFileAccess() }

    func removePartialFile(of task: DownloadTask) async {
        let path = task.record.partialPath
        _ = try? await task.onIOQueue { try DirectFileAccess().remove(path) }
    }
}
