import Crypto
@testable import DownloadEngine
@testable import DownloadModel
import Logging
import Metalink
import NIOConcurrencyHelpers
import NIOSSL

/// A transfer run's owner without a manager: no scheduler, no task table, no daemon. It applies
/// what the run reports as the manager does (`TaskChange.step`, in the task's event order), and
/// writes down the changes that are the scheduler's; it delivers events
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

    /// Moves `task` to running, as the scheduler's start does.
    @discardableResult
    func start(_ task: DownloadTask) -> TaskSnapshot? {
        take(.move(to: .running), on: task)
    }

    func apply(_ change: TaskChange, to task: DownloadTask) -> TaskSnapshot? {
        guard let step = change.step(resumeDataKey: resumeDataKey) else {
            if case .mayTakeMore = change { return nil }
            note("\(change)")
            return nil
        }
        let snapshot = take(step, on: task)
        if case .stopped(.wait, _) = change { note("requeue") }
        if case .failed = change, task.record.group != 0 { note("group file failed") }
        return snapshot
    }

    /// Takes a step as the manager does, with no scheduler to tell.
    private func take(_ step: TaskStep, on task: DownloadTask) -> TaskSnapshot? {
        task.inEventOrder {
            if let next = step.next {
                guard let (_, snapshot) = task.transition(to: next, from: step.allowed, { _ = step.change(&$0) }) else {
                    return nil
                }
                events.stateChanged(task, snapshot)
                step.events(events, task, snapshot)
                return snapshot
            }
            guard let snapshot = task.withState({ state in step.change(&state) ? state.snapshot : nil }) else {
                return nil
            }
            step.events(events, task, snapshot)
            return snapshot
        }
    }

    var reconnectGeneration: UInt64 { generation.withLockedValue { $0 } }

    func publishesWithGroup(_ task: DownloadTask) -> Bool { false }
    func awaitPublication(of task: DownloadTask) async throws -> GroupPublication { .publish }
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
    func originAttributesRefused(_ code: Int32, attribute: String, at path: String) {}

    func removePartialFile(of task: DownloadTask) async {
        let path = task.record.partialPath
        _ = try? await task.onIOQueue { try DirectFileAccess().remove(path) }
    }
}
