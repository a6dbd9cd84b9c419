import DownloadEngine
import DownloadModel
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Restarts, resume data, and concurrent control of one task.
final class RecoveryTests: EngineTestCase {
    func testRestoredTaskTruncatesBytesPastTheCheckpoint() async throws {
        let content = Self.content(500_000)
        server.set("/r", Route(content: content))
        var record = DownloadTaskRecord(
            id: 42, owner: Self.owner, session: "s", url: server.url("/r"), destination: directory.file("restored"),
            destinationIsDirectory: false, options: DownloadOptions(), state: .running, durableOffset: 200_000,
            expectedLength: Int64(content.count), validator: "\"v1\""
        )
        // The crash left 50,000 bytes of garbage after the durable checkpoint.
        let partial = Array(content[0..<200_000]) + [UInt8](repeating: 0xEE, count: 50_000)
        try Data(partial).write(to: URL(fileURLWithPath: record.partialPath))
        record.finalURL = record.url
        manager.restore([record], nextID: 1)
        let done = try await wait(42, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("restored")), Self.sha256(content))
        XCTAssertEqual(server.requests(for: "/r").map(\.range), ["bytes=200000-"])
    }

    /// A task that was retrying when the daemon stopped is queued again without the error it
    /// was waiting out.
    func testARestoredRetryingTaskIsQueuedWithoutItsError() async throws {
        let content = Self.content(1000)
        server.set("/again", Route(content: content))
        var record = DownloadTaskRecord(
            id: 9, owner: Self.owner, session: "s", url: server.url("/again"), destination: directory.file("again"),
            destinationIsDirectory: false, options: DownloadOptions(), state: .retrying, durableOffset: 0,
            expectedLength: -1, validator: nil
        )
        record.errorName = "HTTPError"
        record.errorMessage = "the server answered 503 Service Unavailable"
        manager.restore([record], nextID: 1)
        XCTAssertNil(manager.snapshot(9)?.record.errorName)
        XCTAssertNil(manager.snapshot(9)?.record.errorMessage)
        let done = try await wait(9, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("again")), Self.sha256(content))
    }

    func testRangeAtTheEndAnswered416MeansFinished() async throws {
        let content = Self.content(1000)
        server.set("/done", Route(content: content))
        let record = DownloadTaskRecord(
            id: 7, owner: Self.owner, session: "s", url: server.url("/done"), destination: directory.file("done"),
            destinationIsDirectory: false, options: DownloadOptions(), state: .queued, durableOffset: 1000,
            expectedLength: 1000, validator: "\"v1\""
        )
        try Data(content).write(to: URL(fileURLWithPath: record.partialPath))
        manager.restore([record], nextID: 1)
        let done = try await wait(7, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(server.requests(for: "/done").map(\.status), [416])
        XCTAssertEqual(sha256(ofFile: directory.file("done")), Self.sha256(content))
    }

    func testTamperedResumeDataIsRefused() async throws {
        var route = Route(content: Self.content(400_000))
        route.bytesPerSecond = 1_000_000
        server.set("/t", route)
        let id = try start("/t")
        try await waitForBytes(id, atLeast: 50_000)
        let blob = try await manager.pause(id)
        XCTAssertNoThrow(try manager.decodeResumeData(blob, owner: Self.owner))
        var altered = blob
        if let index = altered.firstIndex(of: UInt8(ascii: "{")) { altered[index + 3] ^= 1 }
        let other = SessionManager(resumeDataKey: .init(size: .bits256))
        for (name, bad) in [
            ("altered", altered), ("truncated", Array(blob.dropLast(20))), ("empty", []),
            ("garbage", Array("hello".utf8)), ("huge", [UInt8](repeating: 65, count: 70_000)),
        ] {
            XCTAssertThrowsError(try manager.decodeResumeData(bad, owner: Self.owner), name) { error in
                XCTAssertEqual((error as? DownloadError)?.name, "InvalidResumeData", name)
            }
        }
        XCTAssertThrowsError(try other.decodeResumeData(blob, owner: Self.owner)) { error in
            XCTAssertEqual((error as? DownloadError)?.name, "InvalidResumeData")
        }
        await other.shutdown()
    }

    func testConcurrentControlCallsNeverCorruptATask() async throws {
        var route = Route(content: Self.content(2_000_000))
        route.bytesPerSecond = 1_000_000
        server.set("/busy", route)
        let id = try start("/busy")
        try await waitForBytes(id, atLeast: 10_000)
        let manager = self.manager!
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    switch i % 3 {
                    case 0: _ = try? await manager.pause(id)
                    case 1: try? manager.resume(id)
                    default: _ = manager.snapshot(id)
                    }
                }
            }
        }
        // Every recorded transition was an allowed one.
        let states = observer.states(id)
        var previous = DownloadState.queued
        for state in states {
            XCTAssertTrue(previous.canTransition(to: state), "\(previous) → \(state) in \(states)")
            previous = state
        }
        try await manager.cancel(id)
        XCTAssertEqual(manager.snapshot(id)?.state, .cancelled)
        XCTAssertEqual(leftovers(), [])
    }

    func testStoppingQueuedTasksAsTheirPlaceFreesNeverLeavesARunBehind() async throws {
        await manager.shutdown()
        manager = makeManager { $0.maxRunning = 1 }
        var route = Route(content: Self.content(400_000))
        route.bytesPerSecond = 2_000_000
        server.set("/p", route)
        let manager = self.manager!
        for round in 0..<8 {
            let holder = try start("/p")
            try await waitForBytes(holder, atLeast: 1)
            let queued = try (0..<12).map { _ in try start("/p") }
            // Pausing the holder frees the place: the scheduler picks the next queued task while
            // the others are being paused or cancelled.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { _ = try? await manager.pause(holder) }
                for (i, id) in queued.enumerated() {
                    group.addTask {
                        if (i + round) % 2 == 0 {
                            _ = try? await manager.pause(id)
                        } else {
                            try? await manager.cancel(id)
                        }
                    }
                }
            }
            let before = queued.map { manager.snapshot($0) }
            try await Task.sleep(for: .milliseconds(150))
            for (id, earlier) in zip(queued, before) {
                let now = try XCTUnwrap(manager.snapshot(id))
                if earlier?.state == .paused || earlier?.state == .cancelled {
                    // A stopped task stays stopped and writes nothing more.
                    XCTAssertEqual(now.state, earlier?.state, "round \(round), task \(id)")
                    XCTAssertEqual(now.bytesWritten, earlier?.bytesWritten, "round \(round), task \(id)")
                }
                var previous = DownloadState.queued
                for state in observer.states(id) {
                    XCTAssertTrue(previous.canTransition(to: state), "\(previous) → \(state) in \(observer.states(id))")
                    previous = state
                }
            }
            for id in [holder] + queued { try? await manager.cancel(id) }
            for id in [holder] + queued { _ = try await wait(id, for: [.cancelled, .finished]) }
        }
        XCTAssertEqual(leftovers(), [])
        // Nothing holds a place: a new task starts at once.
        let last = try start("/p")
        let done = try await wait(last, for: [.finished, .failed], seconds: 10)
        XCTAssertEqual(done.state, .finished)
    }

    func testCancelRemovesThePartialFile() async throws {
        var route = Route(content: Self.content(1_000_000))
        route.bytesPerSecond = 500_000
        server.set("/c", route)
        let id = try start("/c")
        try await waitForBytes(id, atLeast: 10_000)
        XCTAssertEqual(leftovers().count, 1)
        try await manager.cancel(id)
        XCTAssertEqual(manager.snapshot(id)?.state, .cancelled)
        XCTAssertEqual(leftovers(), [])
        XCTAssertTrue(observer.all.contains(.failed(id, "Cancelled", false)))
        await XCTAssertThrowsErrorAsync(try await manager.cancel(id), code: .wrongState)
    }

    func testSchedulerRunsAtMostTheLimitPerSession() async throws {
        await manager.shutdown()
        // shortTransfer 0: a task with little left to fetch would stop counting against the
        // limit, and a loaded machine reads the states only after a1's response came.
        manager = makeManager {
            $0.maxRunning = 3; $0.maxRunningPerSession = 1; $0.shortTransfer = 0
        }
        var route = Route(content: Self.content(100_000))
        route.bytesPerSecond = 400_000
        server.set("/q", route)
        let a1 = try start("/q", session: "a")
        let a2 = try start("/q", session: "a")
        let b1 = try start("/q", session: "b")
        // The scheduler starts what fits as soon as tasks are created: wait for the two to run.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline,
            manager.snapshot(a1)?.state != .running || manager.snapshot(b1)?.state != .running
        {
            try await Task.sleep(for: .milliseconds(5))
        }
        XCTAssertEqual(manager.snapshot(a1)?.state, .running)
        XCTAssertEqual(manager.snapshot(a2)?.state, .queued)
        XCTAssertEqual(manager.snapshot(b1)?.state, .running)
        for id in [a1, a2, b1] { try await wait(id, for: [.finished]) }
        let sessionA = RecordingObserver.Event.sessionIdle(SessionID(owner: Self.owner, name: "a"))
        try await waitForEvent { $0 == sessionA }
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(
            observer.all.filter { $0 == sessionA }.count, 1, "session a became idle once, after its last task")
    }
}

/// Fails unless `expression` throws a `DownloadError` of `code`.
func XCTAssertThrowsErrorAsync<T>(
    _ expression: @autoclosure () async throws -> T, code: DownloadError.Code, file: StaticString = #filePath,
    line: UInt = #line
) async {
    do {
        _ = try await expression()
        XCTFail("expected an error", file: file, line: line)
    } catch {
        XCTAssertEqual((error as? DownloadError)?.code, code, "\(error)", file: file, line: line)
    }
}

extension RecoveryTests {
    func testFullDiskFailsWithAReasonAndResumesWhenThereIsRoomAgain() async throws {
        let mountPoint = directory.file("small")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mounted = try await ProcessRunner.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint])
        guard mounted.status == 0 else { throw XCTSkip("cannot mount a small tmpfs here: \(mounted.stderr)") }
        defer { _ = try? ProcessRunner.runBlocking(["umount", "-l", mountPoint]) }
        let content = Self.content(3_000_000)
        server.set("/big", Route(content: content))
        let target = mountPoint + "/big.bin"
        let id = try start("/big", destination: target)
        let failed = try await wait(id, for: [.failed, .finished])
        XCTAssertEqual(failed.state, .failed)
        XCTAssertEqual(failed.record.errorName, "FileError")
        XCTAssertTrue(
            failed.record.errorMessage?.contains("No space left on device") ?? false, failed.record.errorMessage ?? "")
        XCTAssertGreaterThan(failed.durableOffset, 0)
        XCTAssertEqual(failed.bytesWritten, failed.durableOffset, "a failed task reports the bytes it keeps")
        XCTAssertTrue(observer.all.contains(.failed(id, "FileError", true)), "resume data is offered")
        let grown = try await ProcessRunner.run(["mount", "-o", "remount,size=8m", mountPoint])
        XCTAssertEqual(grown.status, 0, grown.stderr)
        try manager.resume(id)
        let done = try await wait(id, for: [.failed, .finished])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(
            server.requests(for: "/big").last?.range, "bytes=\(failed.durableOffset)-",
            "nothing written before was lost")
    }
}
