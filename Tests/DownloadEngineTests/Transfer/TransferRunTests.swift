@testable import DownloadEngine
@testable import DownloadModel
import Foundation
import Glibc
import TestHTTPServer
import TestSupport
import XCTest

/// One `TransferRun` with a fake owner (`FakeRunOwner`) against a local server: no manager, no
/// scheduler, no store, no daemon. What the run does is read from the file it wrote, the events
/// its owner delivered and what it asked of its owner.
final class TransferRunTests: RunTestCase {
    /// A task as the manager hands it to a run: running, owned by this process's user.
    func runningTask(_ path: String, _ change: (inout DownloadTaskRecord) -> Void = { _ in }) -> DownloadTask {
        var record = DownloadTaskRecord(
            id: 1,
            request: DownloadRequest(
                owner: getuid(), session: "s", url: server.url(path), destination: directory.file("out"),
                destinationIsDirectory: false
            ))
        change(&record)
        let task = DownloadTask(record: record)
        XCTAssertNotNil(owner.start(task))
        return task
    }

    /// Runs `task` to its end and waits for its events to reach the observer.
    func run(_ task: DownloadTask) async {
        await TransferRun(task: task, owner: owner, start: task.runStart(answers: .none)).run()
        await owner.events.eventsDelivered(after: task)
    }

    func testAHeadAnd200WriteTheFileAndFinish() async throws {
        let content = TestData.content(200_000)
        var route = Route(content: content)
        route.extraHeaders = [("Content-Disposition", "attachment; filename=\"named.bin\"")]
        server.set("/f", route)
        let task = runningTask("/f")
        await run(task)

        XCTAssertEqual(task.record.state, .finished)
        XCTAssertEqual(TestData.sha256(ofFile: directory.file("out")), TestData.sha256(content))
        XCTAssertEqual(task.record.expectedLength, 200_000)
        XCTAssertEqual(task.record.validator, "\"v1\"")
        XCTAssertEqual(observer.states(1), [.running, .finished])
        XCTAssertTrue(observer.all.contains(.response(1, 200)))
        XCTAssertTrue(observer.all.contains(.finished(1, directory.file("out"))))
        // A head with at most `shortTransfer` to go: the run told its owner so.
        XCTAssertEqual(owner.asked, ["lease direct", "short"])
        XCTAssertEqual(server.requests(for: "/f").map(\.range), [nil])
    }

    func testA200ToARangeStartsAgainFromZero() async throws {
        let content = TestData.content(150_000)
        var route = Route(content: content)
        route.ranges = false
        server.set("/f", route)
        let task = runningTask("/f") { record in
            record.durableOffset = 50_000
            record.validator = "\"v1\""
            record.expectedLength = 150_000
        }
        // What an earlier run left: the first 50,000 bytes, but of another version.
        let stale = [UInt8](repeating: 0xEE, count: 50_000)
        XCTAssertTrue(FileManager.default.createFile(atPath: task.record.partialPath, contents: Data(stale)))
        await run(task)

        XCTAssertEqual(server.requests(for: "/f").map(\.range), ["bytes=50000-"])
        XCTAssertEqual(server.requests(for: "/f").map(\.ifRange), ["\"v1\""])
        XCTAssertEqual(server.requests(for: "/f").map(\.status), [200])
        XCTAssertEqual(task.record.state, .finished)
        // Not a byte of the old version is left: the whole body went in from 0.
        XCTAssertEqual(TestData.sha256(ofFile: directory.file("out")), TestData.sha256(content))
        XCTAssertFalse(FileManager.default.fileExists(atPath: task.record.partialPath))
    }

    func testAStopMidBodyCheckpointsWhatIsWrittenAndPauses() async throws {
        let content = TestData.content(2_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 400_000
        server.set("/slow", route)
        let task = runningTask("/slow")
        let run = TransferRun(task: task, owner: owner, start: task.runStart(answers: .none))
        let runner = Task { await run.run() }
        let deadline = ContinuousClock.now + .seconds(20)
        while task.snapshot.bytesWritten < 100_000, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        // As the manager stops a run: the reason under the task's lock, its requests stopped after it, its Task too.
        let requests = task.withState { state in
            state.stopReason = .pause
            return state.requests
        }
        for cancel in requests.stop() { cancel() }
        runner.cancel()
        await runner.value
        await owner.events.eventsDelivered(after: task)

        let record = task.record
        XCTAssertEqual(record.state, .paused)
        XCTAssertEqual(observer.states(1), [.running, .paused])
        XCTAssertGreaterThanOrEqual(record.durableOffset, 100_000)
        XCTAssertLessThan(record.durableOffset, 2_000_000)
        // What is recorded as durable is in the partial file, byte for byte.
        let partial = try XCTUnwrap(FileManager.default.contents(atPath: record.partialPath))
        XCTAssertGreaterThanOrEqual(Int64(partial.count), record.durableOffset)
        XCTAssertEqual(
            Array(partial.prefix(Int(record.durableOffset))), Array(content.prefix(Int(record.durableOffset))))
        XCTAssertTrue(observer.all.contains(.checkpoint(1, record.durableOffset)))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("out")))
    }

    func testA503IsRetriedAndTheRunFinishes() async throws {
        let content = TestData.content(100_000)
        var route = Route(content: content)
        route.failFirst = (count: 1, status: 503, retryAfter: nil)
        server.set("/busy", route)
        let task = runningTask("/busy")
        await run(task)

        XCTAssertEqual(observer.states(1), [.running, .retrying, .running, .finished])
        XCTAssertEqual(server.requests(for: "/busy").map(\.status), [503, 200])
        XCTAssertEqual(TestData.sha256(ofFile: directory.file("out")), TestData.sha256(content))
        // The transient error is cleared once the retry got through.
        XCTAssertNil(task.record.errorName)
    }

    func testCheckpointsRecordWhatIsDurableAsTheBodyComes() async throws {
        let content = TestData.content(600_000)
        var route = Route(content: content)
        route.bytesPerSecond = 3_000_000
        server.set("/f", route)
        let task = runningTask("/f")
        await run(task)

        let checkpoints = observer.all.compactMap { event -> Int64? in
            if case .checkpoint(1, let offset) = event { return offset }
            return nil
        }
        // One at least every 64 KiB (`checkpointBytes`) while the body came, in order, each short of the end.
        let during = checkpoints.filter { $0 > 0 && $0 < 600_000 }
        XCTAssertGreaterThanOrEqual(during.count, 3, "\(checkpoints)")
        XCTAssertEqual(during, during.sorted())
        XCTAssertEqual(task.record.state, .finished)
        XCTAssertEqual(TestData.sha256(ofFile: directory.file("out")), TestData.sha256(content))
    }

    func testA404FailsTheRunAndLeavesNothing() async throws {
        let task = runningTask("/missing")
        await run(task)

        XCTAssertEqual(task.record.state, .failed)
        XCTAssertEqual(task.record.errorName, "HTTPError")
        XCTAssertTrue(observer.all.contains(.failed(1, "HTTPError", false)))
        XCTAssertFalse(FileManager.default.fileExists(atPath: task.record.partialPath))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("out")))
    }
}
