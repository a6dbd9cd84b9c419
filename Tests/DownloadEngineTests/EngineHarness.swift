import Crypto
import DownloadEngine
import DownloadModel
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// Records every event, in order.
final class RecordingObserver: DownloadObserver {
    enum Event: Equatable, Sendable {
        case state(UInt64, DownloadState)
        case response(UInt64, Int)
        case progress(UInt64, Int64)
        case checkpoint(UInt64, Int64)
        case finished(UInt64, String)
        case failed(UInt64, String, Bool)
        case sessionIdle(SessionID)
        case waiting(UInt64, WaitingFor)
        case groupPublishing(UInt64)
        case groupNotPublished(UInt64)
    }

    let events = NIOLockedValueBox([Event]())

    func task(_ task: TaskSnapshot, didChangeState state: DownloadState) { append(.state(task.id, state)) }
    func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64) {
        append(.response(task.id, status))
    }
    func task(
        _ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64
    ) {
        append(.progress(task.id, totalBytesWritten))
    }
    func taskDidCheckpoint(_ task: TaskSnapshot) { append(.checkpoint(task.id, task.durableOffset)) }
    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) { append(.finished(task.id, location)) }
    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {
        append(.failed(task.id, error.name, resumeData != nil))
    }
    func sessionDidFinishEvents(_ session: SessionID) { append(.sessionIdle(session)) }
    func task(_ task: TaskSnapshot, isWaitingFor reason: WaitingFor) { append(.waiting(task.id, reason)) }
    func groupWillPublish(_ group: DownloadGroupRecord) { append(.groupPublishing(group.id)) }
    func groupDidNotPublish(_ group: DownloadGroupRecord) { append(.groupNotPublished(group.id)) }

    private func append(_ event: Event) { events.withLockedValue { $0.append(event) } }

    var all: [Event] { events.withLockedValue { $0 } }

    func states(_ id: UInt64) -> [DownloadState] {
        all.compactMap { if case .state(id, let s) = $0 { return s } else { return nil } }
    }
}

class EngineTestCase: XCTestCase {
    var server: TestHTTPServer!
    var directory: TemporaryDirectory!
    var observer: RecordingObserver!
    var manager: SessionManager!
    let key = SymmetricKey(data: [UInt8](repeating: 7, count: 32))
    var nextID: UInt64 = 1
    /// The uid the tests' tasks belong to.
    static let owner: UInt32 = 1000

    override func setUp() async throws {
        server = try TestHTTPServer()
        directory = try TemporaryDirectory(prefix: "engine-test")
        observer = RecordingObserver()
        manager = makeManager()
    }

    override func tearDown() async throws {
        await manager?.shutdown()
        server?.stop()
        directory?.remove()
    }

    func makeManager(_ change: (inout SessionManager.Configuration) -> Void = { _ in }) -> SessionManager {
        var configuration = SessionManager.Configuration()
        configuration.retry = RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.2, retryAfterCap: 2)
        configuration.checkpointBytes = 64 * 1024
        change(&configuration)
        return SessionManager(
            configuration: configuration, resumeDataKey: key, delegate: EventDelivery(observers: [observer]))
    }

    static func content(_ size: Int, seed: UInt32 = 1) -> [UInt8] { TestData.content(size, seed: seed) }
    static func sha256(_ bytes: [UInt8]) -> String { TestData.sha256(bytes) }
    func sha256(ofFile path: String) -> String? { TestData.sha256(ofFile: path) }

    /// Adds a task downloading `path` of the test server to `destination` (a file in the temp dir by default).
    @discardableResult
    func start(
        _ path: String, destination: String? = nil, isDirectory: Bool = false, session: String = "s",
        options: (inout DownloadOptions) -> Void = { _ in }
    ) throws -> UInt64 {
        var opts = DownloadOptions()
        options(&opts)
        let expected = nextID
        nextID += 1
        let id = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: session, url: server.url(path),
                destination: destination ?? directory.file("out\(expected)"),
                destinationIsDirectory: isDirectory, options: opts
            )
        ).id
        XCTAssertEqual(id, expected, "the engine gives ids in order from 1")
        return id
    }

    /// Waits (bounded, not timed) until the task reaches one of `states`.
    @discardableResult
    func wait(_ id: UInt64, for states: Set<DownloadState>, seconds: Double = 30) async throws -> TaskSnapshot {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let snapshot = manager.snapshot(id), states.contains(snapshot.state) {
                // Events reach observers on the task's queue, after the change: wait for them.
                await manager.eventsDelivered(id)
                return snapshot
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let state = manager.snapshot(id)?.state.rawValue ?? "missing"
        XCTFail("task \(id) did not reach \(states) (is \(state))")
        throw CancellationError()
    }

    /// Waits (bounded) until the observer has seen an event matching `match`.
    func waitForEvent(seconds: Double = 10, _ match: (RecordingObserver.Event) -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if observer.all.contains(where: match) { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        XCTFail("no such event in \(observer.all)")
    }

    func waitForBytes(_ id: UInt64, atLeast bytes: Int64, seconds: Double = 30) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let snapshot = manager.snapshot(id), snapshot.bytesWritten >= bytes { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        XCTFail("task \(id) did not write \(bytes) bytes")
    }

    func leftovers() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".part") }
    }
}
