import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Starting, refusing to start, quotas, and what a restart keeps.
final class DaemonLifecycleTests: DaemonTestCase {
    override var extraArguments: [String] { ["--max-tasks-per-user", "2"] }

    func testRefusesToStartWhenTheNameIsTaken() async throws {
        let second = try await run(
            [
                DaemonTestCase.binary, "--address", bus.address, "--state-dir", directory.file("other-state"),
            ], timeout: 30)
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.stderr.contains("already owned"), second.stderr)
        XCTAssertTrue(second.stderr.contains("is another downloadsd running?"), second.stderr)
        let list = try await call("ListTasks", [.string("")])
        XCTAssertEqual(list, [.objectPaths([])], "the first daemon is unharmed")
    }

    /// A daemon started by hand (no `--exit-idle-time`, no `DBUS_STARTER_BUS_TYPE`) has nothing to
    /// start it again: it stays. One D-Bus started exits when idle (30 s unless told).
    func testAHandStartedDaemonStaysAndAnActivatedOneExitsWhenIdle() async throws {
        stopDaemon()
        for (environment, expected) in [
            ([String: String](), "not exiting when idle"),
            (["DBUS_STARTER_BUS_TYPE": "session"], "exits after 30 s idle"),
        ] {
            let log = directory.file("by-hand-\(environment.count).log")
            let byHand = try ChildProcess(
                ["/bin/sh", "-c", "exec \"$0\" \"$@\" 2>>\(log)", DaemonTestCase.binary, "--state-dir", stateDirectory]
                    + busArguments,
                environment: bus.environment.merging(environment) { $1 }
            )
            defer { byHand.stop() }
            try await until("serving") {
                ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("serving org.example.Downloads")
            }
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            XCTAssertTrue(text.contains(expected), text)
        }
        // The shipped units and activation files say 30 themselves (systemd sets no DBUS_STARTER_*).
        for file in [
            "dbus/services/org.example.Downloads.service", "dbus/system-services/org.example.Downloads.service",
            "data/systemd/user/org.example.Downloads.service", "data/systemd/system/org.example.Downloads.service",
        ] {
            let text = try String(contentsOf: PackageRoot.url.appendingPathComponent(file), encoding: .utf8)
            XCTAssertTrue(text.contains("downloadsd --s") && text.contains(" --exit-idle-time 30\n"), file)
        }
    }

    func testRefusesToStartWithAnUnusableStateDirectory() async throws {
        let file = directory.file("not-a-directory")
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data()))
        let output = try await run([DaemonTestCase.binary, "--address", bus.address, "--state-dir", file], timeout: 30)
        XCTAssertEqual(output.status, 1)
        XCTAssertTrue(output.stderr.contains("the state directory \(file) is unusable"), output.stderr)
    }

    func testTheStateDirectoryIsTheDaemonsAlone() async throws {
        // The running daemon's directory: created 0700, every file in it 0600.
        func mode(_ path: String) -> Int? {
            (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int
        }
        XCTAssertEqual(mode(stateDirectory), 0o700)
        for name in ["downloads.sqlite", "resume-data.key"] {
            XCTAssertEqual(mode(stateDirectory + "/" + name), 0o600, name)
        }
        // An existing directory of ours that others can read is tightened, and the log says so.
        let loose = directory.file("loose")
        try FileManager.default.createDirectory(
            atPath: loose, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let other = try PrivateBus()
        defer { other.stop() }
        let daemon = try ChildProcess(
            [
                "/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\(directory.file("loose.log"))", DaemonTestCase.binary,
                "--address", other.address, "--state-dir", loose,
            ],
            environment: other.environment
        )
        defer { daemon.stop() }
        let probe = try await Connection.open(.address(other.address))
        defer { probe.close() }
        for _ in 0..<500 {
            if try await probe.nameOwner("org.example.Downloads") != nil { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(mode(loose), 0o700)
        let log = (try? String(contentsOfFile: directory.file("loose.log"), encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("was mode 755; tightened to 0700"), log)
        // Someone else's directory, or a symlink, is refused.
        let foreign = directory.file("foreign")
        try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: false)
        XCTAssertEqual(chown(foreign, 65534, 65534), 0)
        let refused = try await run(
            [DaemonTestCase.binary, "--address", bus.address, "--state-dir", foreign], timeout: 30)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("belongs to uid 65534"), refused.stderr)
        let link = directory.file("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: loose)
        let linked = try await run([DaemonTestCase.binary, "--address", bus.address, "--state-dir", link], timeout: 30)
        XCTAssertEqual(linked.status, 1)
        XCTAssertTrue(linked.stderr.contains("is not a directory"), linked.stderr)
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
        let mode =
            try FileManager.default.attributesOfItem(atPath: stateDirectory + "/resume-data.key")[.posixPermissions]
            as? Int
        XCTAssertEqual(mode, 0o600)
    }
}
