import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Starting, refusing to start, quotas, and what a restart keeps.
final class DaemonLifecycleTests: DaemonTestCase {
    override var extraArguments: [String] { ["--max-tasks-per-user", "2"] }

    func testRefusesToStartWhenTheNameIsTaken() async throws {
        let second = try await run([
            DaemonTestCase.binary, "--address", bus.address, "--state-dir", directory.file("other-state"),
        ], timeout: 30)
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.stderr.contains("already owned"), second.stderr)
        XCTAssertTrue(second.stderr.contains("is another downloadsd running?"), second.stderr)
        let list = try await call("ListTasks", [.string("")])
        XCTAssertEqual(list, [.objectPaths([])], "the first daemon is unharmed")
    }

    func testRefusesToStartWithAnUnusableStateDirectory() async throws {
        let file = directory.file("not-a-directory")
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data()))
        let output = try await run([DaemonTestCase.binary, "--address", bus.address, "--state-dir", file], timeout: 30)
        XCTAssertEqual(output.status, 1)
        XCTAssertTrue(output.stderr.contains("the state directory \(file) is unusable"), output.stderr)
    }

    func testQuotaPerCaller() async throws {
        var slow = Route(content: Self.content(1_000_000))
        slow.bytesPerSecond = 100_000
        http.set("/q", slow)
        _ = try await start(http.url("/q"), directory.file("q1"))
        _ = try await start(http.url("/q"), directory.file("q2"))
        do {
            _ = try await start(http.url("/q"), directory.file("q3"))
            XCTFail("a third task is over the quota")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.QuotaExceeded")
        }
    }

    func testPausedTasksStayPausedAcrossARestartAndTheKeyPersists() async throws {
        let content = Self.content(2_000_000)
        var slow = Route(content: content)
        slow.bytesPerSecond = 1_000_000
        http.set("/p", slow)
        let path = try await start(http.url("/p"), directory.file("p.bin"))
        try await waitBytes(path, atLeast: 100_000)
        let before = try await call("Pause", [.objectPath(path)])
        killDaemon()
        try await startDaemon()
        let state = try await property(path, "State")
        XCTAssertEqual(state, .string("paused"))
        // The HMAC key survived the restart: the old resume data is still accepted.
        let data = try XCTUnwrap(before.first?.bytesValue)
        let resumed = try await call("ResumeWithData", [.bytes(data), .vardict([:])])
        XCTAssertEqual(resumed, [.objectPath(path)])
        http.update("/p") { $0.bytesPerSecond = nil }
        try await waitState(path, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("p.bin")), Self.sha256(content))
        let mode = try FileManager.default.attributesOfItem(atPath: stateDirectory + "/resume-data.key")[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
    }
}
