import DBus
import Foundation
import TestHTTPServer
import XCTest

/// Ended tasks stay listed for --retention-days; the sweep runs at start and hourly.
final class RetentionTests: DaemonTestCase {
    override var extraArguments: [String] { ["--retention-days", "0"] }

    func testEndedTasksAreRemovedAfterTheRetentionPeriod() async throws {
        http.set("/r", Route(content: Self.content(1000)))
        var slow = Route(content: Self.content(2_000_000))
        slow.bytesPerSecond = 200_000
        http.set("/slow", slow)
        let ended = try await start(http.url("/r"), directory.file("r"))
        try await waitState(ended, ["finished"])
        let paused = try await start(http.url("/slow"), directory.file("slow"))
        _ = try await call("Pause", [.objectPath(paused)])
        let before = try await call("ListTasks", [.string("")])
        XCTAssertEqual(before, [.objectPaths([ended, paused])], "still listed until the next sweep")
        stopDaemon()
        try await startDaemon()
        try await until("the sweep at start removed the finished task") {
            try await self.call("ListTasks", [.string("")]) == [.objectPaths([paused])]
        }
        let after = try await call("ListTasks", [.string("")])
        XCTAssertEqual(after, [.objectPaths([paused])], "the finished task expired; the paused one has not ended")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: directory.file("r")), "expiry forgets the task, not the file")
    }

    func testFailedSignalCarriesTheErrorNameAndMessage() async throws {
        let path = try await start(http.url("/missing"), directory.file("m"))
        try await waitState(path, ["failed"])
        try await until("the Failed signal") {
            self.signals.withLockedValue { $0 }.contains { $0.0 == "Failed" && $0.1.first == .objectPath(path) }
        }
        let failed = signals.withLockedValue { $0 }.first { $0.0 == "Failed" && $0.1.first == .objectPath(path) }
        XCTAssertEqual(failed?.1.dropFirst().first, .string("org.example.Downloads.Error.HTTPError"))
        XCTAssertEqual(failed?.1.dropFirst(2).first, .string("the server answered 404 Not Found"))
        XCTAssertEqual(failed?.1.last, .bytes([]), "nothing to resume from")
        let error = try await property(path, "Error")
        XCTAssertEqual(error, .string("org.example.Downloads.Error.HTTPError"))
    }

    func testCancelOfAFailedTaskRemovesItsPartialFile() async throws {
        // Some bytes arrive, then the resource is gone: the task fails and keeps its bytes.
        var slow = Route(content: Self.content(1_000_000))
        slow.bytesPerSecond = 500_000
        http.set("/cut", slow)
        let path = try await start(http.url("/cut"), directory.file("cut.bin"))
        try await waitBytes(path, atLeast: 100_000)
        _ = try await call("Pause", [.objectPath(path)])
        http.update("/cut") { $0.failFirst = (1000, 404, nil) }
        _ = try await call("Resume", [.objectPath(path)])
        try await waitState(path, ["failed"])
        let partials = {
            ((try? FileManager.default.contentsOfDirectory(atPath: self.directory.path)) ?? []).filter {
                $0.hasSuffix(".part")
            }
        }
        XCTAssertEqual(partials().count, 1, "a failed task keeps its partial file for Resume")
        _ = try await call("Cancel", [.objectPath(path)])
        XCTAssertEqual(partials(), [], "Cancel removes partial data")
        let list = try await call("ListTasks", [.string("")])
        XCTAssertEqual(list, [.objectPaths([])])
    }
}
