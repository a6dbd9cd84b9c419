@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import TestHTTPServer
import XCTest

/// `earliest_begin`: a task stays queued (`WaitingFor` `begin-time`) until its time, through a
/// pause and resume and a restart, then begins by itself.
final class BeginTimeTests: EngineTestCase {
    func testATaskBeginsAtItsTimeAndNotBefore() async throws {
        let content = Self.content(100_000, seed: 8)
        server.set("/later", Route(content: content))
        let begin = WallClock.now + 2
        let id = try start("/later") { $0.earliestBegin = begin }
        XCTAssertEqual(manager.snapshot(id)?.state, .queued)
        XCTAssertEqual(manager.snapshot(id)?.waitingFor, .beginTime)
        // The first request, seen as soon as it comes: never before the time.
        let deadline = Date() + 20
        while server.requests(for: "/later").isEmpty && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertFalse(server.requests(for: "/later").isEmpty, "it began")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince1970, Double(begin), "not before its time")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        let waits = observer.all.compactMap { event -> WaitingFor? in
            if case .waiting(id, let reason) = event { return reason } else { return nil }
        }
        XCTAssertEqual(waits.first, .slot, "observers heard when it stopped waiting for its time")
    }

    func testTheBeginTimeHoldsThroughPauseResumeAndRestart() async throws {
        server.set("/much-later", Route(content: Self.content(1000)))
        let begin = WallClock.now + 3_600
        let id = try start("/much-later") { $0.earliestBegin = begin }
        _ = try await manager.pause(id)
        XCTAssertEqual(manager.snapshot(id)?.state, .paused)
        XCTAssertEqual(manager.snapshot(id)?.waitingFor, .nothing)
        try manager.resume(id)
        XCTAssertEqual(manager.snapshot(id)?.state, .queued)
        XCTAssertEqual(manager.snapshot(id)?.waitingFor, .beginTime, "Resume keeps the begin time")
        let record = try XCTUnwrap(manager.snapshot(id)?.record)
        // A new engine on the same record, as a restart restores it.
        await manager.shutdown()
        manager = makeManager()
        manager.restore([record], nextID: id + 1)
        XCTAssertEqual(manager.snapshot(id)?.waitingFor, .beginTime)
        XCTAssertEqual(manager.snapshot(id)?.record.options.earliestBegin, begin)
        XCTAssertEqual(manager.beginTimer.withLockedValue { $0.at }, begin, "the timer is armed for it")
        XCTAssertTrue(server.requests(for: "/much-later").isEmpty)
    }
}
