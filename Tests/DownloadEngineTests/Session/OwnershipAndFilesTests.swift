import Crypto
import DownloadEngine
import DownloadModel
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// What the engine owns: partial files (none for a refused request), resume data bound to its
/// owner, options that change on a live task, credentials that stay with their origin.
final class OwnershipAndFilesTests: EngineTestCase {
    /// The per-owner counts behind Start's quotas and the session's idle check follow every
    /// task in and out (they are kept, not recounted, so ten thousand tasks cost no more).
    func testTaskAndSessionCountsFollowTasksInAndOut() async throws {
        server.set("/c", Route(content: Self.content(10_000)))
        let a = try start("/c", session: "one")
        let b = try start("/c", session: "two")
        let c = try start("/c", session: "two")
        XCTAssertEqual(manager.taskCount(owner: Self.owner), 3)
        XCTAssertEqual(manager.sessionNames(owner: Self.owner), ["one", "two"])
        XCTAssertEqual(manager.taskCount(owner: 4242), 0)
        for id in [a, b, c] { try await wait(id, for: [.finished]) }
        XCTAssertFalse(manager.hasActiveTasks(in: SessionID(owner: Self.owner, name: "two")))
        let d = try start("/c", session: "two") { $0.maxBytesPerSecond = 1000 }
        XCTAssertTrue(manager.hasActiveTasks(in: SessionID(owner: Self.owner, name: "two")))
        try await manager.cancel(d)
        XCTAssertFalse(manager.hasActiveTasks(in: SessionID(owner: Self.owner, name: "two")))
        try await manager.remove(a)
        XCTAssertEqual(manager.sessionNames(owner: Self.owner), ["two"])
        for id in [b, c, d] { try await manager.remove(id) }
        XCTAssertEqual(manager.taskCount(owner: Self.owner), 0)
        XCTAssertEqual(manager.sessionNames(owner: Self.owner), [])
    }

    func testARequestRefusedBeforeItsFirstByteLeavesNoFile() async throws {
        var missing = Route(content: [])
        missing.failFirst = (count: 100, status: 404, retryAfter: nil)
        server.set("/missing", missing)
        let id = try start("/missing")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.record.errorName, "HTTPError")
        XCTAssertEqual(leftovers(), [], "no partial file for a task that never received a byte")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), [])
    }

    func testAFailedTaskWithBytesKeepsItsPartialFileForResume() async throws {
        await manager.shutdown()
        manager = makeManager { $0.retry = RetryPolicy(maxAttempts: 0) }
        var route = Route(content: Self.content(400_000))
        route.closeAfter = 200_000
        server.set("/cut", route)
        let id = try start("/cut")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .failed)
        XCTAssertGreaterThan(done.durableOffset, 0)
        XCTAssertEqual(leftovers(), [".org.example.Downloads-\(id).part"])
    }

    func testCredentialsGoOnlyToTheOriginTheCallerNamed() async throws {
        let other = try TestHTTPServer()
        defer { other.stop() }
        let content = Self.content(1000)
        other.set("/there", Route(content: content))
        server.set("/here", Route(content: content))
        var cross = Route(content: []); cross.redirect = (302, other.url("/there"))
        var same = Route(content: []); same.redirect = (302, "/here")
        server.set("/cross", cross)
        server.set("/same", same)
        let secrets = [
            "Authorization": "Bearer s3cret", "Cookie": "id=1", "Proxy-Authorization": "Basic eA==", "X-Trace": "t",
        ]
        let crossID = try start("/cross") { $0.headers = secrets }
        let sameID = try start("/same") { $0.headers = secrets }
        for id in [crossID, sameID] {
            let done = try await wait(id, for: [.finished, .failed])
            XCTAssertEqual(done.state, .finished)
        }
        let first = try XCTUnwrap(server.requests(for: "/cross").first)
        XCTAssertEqual(first.userHeaders["authorization"], "Bearer s3cret", "the named origin gets them")
        let there = try XCTUnwrap(other.requests(for: "/there").first)
        XCTAssertNil(there.userHeaders["authorization"], "another port is another origin")
        XCTAssertNil(there.userHeaders["cookie"])
        XCTAssertNil(there.userHeaders["proxy-authorization"])
        XCTAssertEqual(there.userHeaders["x-trace"], "t", "other headers still go")
        let here = try XCTUnwrap(server.requests(for: "/here").first)
        XCTAssertEqual(here.userHeaders["authorization"], "Bearer s3cret", "a same-origin redirect keeps them")
        XCTAssertEqual(here.userHeaders["cookie"], "id=1")
        XCTAssertEqual(sha256(ofFile: directory.file("out\(crossID)")), Self.sha256(content))
    }

    func testResumeDataBindsTheOwnerAndSealsHeaderValues() async throws {
        var route = Route(content: Self.content(400_000))
        route.bytesPerSecond = 1_000_000
        server.set("/secret", route)
        let id = try start("/secret", session: "photos") { $0.headers = ["Authorization": "Bearer s3cret-value"] }
        try await waitForBytes(id, atLeast: 50_000)
        let blob = try await manager.pause(id)
        let text = String(decoding: blob, as: UTF8.self)
        XCTAssertFalse(text.contains("s3cret-value"), "no header value in clear text: \(text)")
        XCTAssertFalse(text.contains("Authorization"), "nor its name")
        XCTAssertTrue(text.contains(#""session":"photos""#), "the plain session name: \(text)")
        XCTAssertTrue(text.contains(#""owner_uid":\#(Self.owner)"#), text)
        let data = try manager.decodeResumeData(blob, owner: Self.owner)
        XCTAssertEqual(data.options.headers, ["Authorization": "Bearer s3cret-value"], "the daemon can open them")
        XCTAssertThrowsError(try manager.decodeResumeData(blob, owner: Self.owner + 1)) { error in
            XCTAssertEqual((error as? DownloadError)?.name, "InvalidResumeData")
        }
    }

    func testAdoptingResumeDataOfARemovedTaskTakesOverItsPartialFile() async throws {
        let content = Self.content(600_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        server.set("/adopt", route)
        let id = try start("/adopt", destination: directory.file("adopted.bin"), session: "photos")
        try await waitForBytes(id, atLeast: 100_000)
        let blob = try await manager.pause(id)
        try await manager.remove(id, keepingPartialFile: true)
        XCTAssertNil(manager.snapshot(id))
        server.update("/adopt") { $0.bytesPerSecond = nil }
        let data = try manager.decodeResumeData(blob, owner: Self.owner)
        let adopted = try await manager.adopt(data, change: .init(priority: .high))
        XCTAssertNotEqual(adopted.id, id)
        XCTAssertEqual(adopted.session, "photos")
        XCTAssertEqual(adopted.owner, Self.owner)
        XCTAssertEqual(adopted.record.options.priority, .high)
        let done = try await wait(adopted.id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("adopted.bin")), Self.sha256(content))
        XCTAssertEqual(
            server.requests(for: "/adopt").last?.range, "bytes=\(data.offset)-", "resumed from the adopted file")
        XCTAssertEqual(leftovers(), [])
    }

    func testOptionsOfAPausedTaskChangeAndAreReported() async throws {
        var route = Route(content: Self.content(300_000))
        route.bytesPerSecond = 1_000_000
        server.set("/opts", route)
        let id = try start("/opts")
        try await waitForBytes(id, atLeast: 10_000)
        _ = try await manager.pause(id)
        let blob = try manager.resumeData(for: id)
        let changed = try await manager.adopt(
            try manager.decodeResumeData(blob, owner: Self.owner),
            change: .init(priority: .low, maxBytesPerSecond: 123_456)
        )
        XCTAssertEqual(changed.id, id, "the paused task itself carries on")
        XCTAssertEqual(manager.snapshot(id)?.record.options.maxBytesPerSecond, 123_456)
        XCTAssertEqual(manager.snapshot(id)?.record.options.priority, .low)
        await manager.eventsDelivered(id)
        XCTAssertTrue(observer.states(id).suffix(1) == [.queued] || observer.states(id).contains(.running))
        server.update("/opts") { $0.bytesPerSecond = nil }
        try manager.changeOptions(id, .init(maxBytesPerSecond: 0))
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
    }

    /// What Start checks of a destination before a task exists, each answer with its own error.
    func testTheDestinationCheckTellsEachCaseApart() throws {
        let me = geteuid()
        let file = directory.file("taken")
        _ = FileManager.default.createFile(atPath: file, contents: Data([1]))
        let dangling = directory.file("dangling")
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: directory.file("nowhere"))
        let linkToDirectory = directory.file("linked")
        try FileManager.default.createSymbolicLink(atPath: linkToDirectory, withDestinationPath: directory.path)

        XCTAssertEqual(try manager.checkDestination(directory.file("new"), overwrite: false, owner: me), false)
        XCTAssertEqual(try manager.checkDestination(directory.path, overwrite: false, owner: me), true, "a directory")
        XCTAssertEqual(
            try manager.checkDestination(linkToDirectory, overwrite: false, owner: me), true, "a link to one")
        XCTAssertEqual(try manager.checkDestination(file, overwrite: true, owner: me), false)
        for (path, code) in [
            (file, DownloadError.Code.fileExists), (dangling, .fileExists),
            (directory.file("missing/new"), .invalidArgument), (file + "/new", .invalidArgument),
        ] {
            XCTAssertThrowsError(try manager.checkDestination(path, overwrite: false, owner: me), path) { error in
                XCTAssertEqual((error as? DownloadError)?.code, code, "\(path): \(error)")
            }
        }
        XCTAssertThrowsError(try manager.checkDestination(directory.file("missing/new"), overwrite: false, owner: me)) {
            error in
            XCTAssertEqual(
                "\(error)".contains("the directory of \(directory.file("missing/new")) does not exist"), true,
                "\(error)")
        }
    }
}
