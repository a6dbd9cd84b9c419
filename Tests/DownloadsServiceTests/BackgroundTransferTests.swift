import DBus
import Foundation
import TestSupport
import XCTest

/// A `background` task on a real bottleneck: a network namespace the test makes, whose loopback
/// is shaped by `tbf` (80 Mbit/s, a 100 ms queue), with the daemon, a server and a competing
/// curl inside. The task says `yielding` while curl uses the link and stops saying it once curl
/// is done, and ends with the right bytes. Skipped where namespaces cannot be made. (The
/// throughput and latency figures are the benchmark's: `make bench`, section background.)
final class BackgroundTransferTests: DaemonTestCase {
    var namespace = ""
    var server: ChildProcess?
    var serverPort = 0
    var www: TemporaryDirectory!

    override var launcher: [String] { ["ip", "netns", "exec", namespace] }

    override func setUp() async throws {
        namespace = "dltest\(getpid())\(Int.random(in: 0..<100_000))"
        for command in [
            ["ip", "netns", "add", namespace],
            ["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "mtu", "1500", "up"],
            ["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "80mbit", "burst", "32kb", "latency", "100ms"],
        ] {
            let out = try await ProcessRunner.run(command, timeout: 20)
            if out.status != 0 {
                _ = try? await ProcessRunner.run(["ip", "netns", "del", namespace], timeout: 20)
                throw XCTSkip("no network namespace with tbf here (\(command.joined(separator: " ")): \(out.stderr.trimmingCharacters(in: .whitespacesAndNewlines)))")
            }
        }
        www = try TemporaryDirectory(prefix: "background-www")
        serverPort = try FreePort.pick()
        server = try ChildProcess(["ip", "netns", "exec", namespace, "/usr/bin/python3", "-m", "http.server", String(serverPort),
                                   "--bind", "127.0.0.1", "--directory", www.path])
        try await super.setUp()
    }

    override func tearDown() async throws {
        try await super.tearDown()
        server?.stop()
        www?.remove()
        _ = try? await ProcessRunner.run(["ip", "netns", "del", namespace], timeout: 20)
    }

    func url(_ name: String) -> String { "http://127.0.0.1:\(serverPort)/\(name)" }

    func testABackgroundTaskYieldsWhileAnotherDownloadRunsAndEndsRight() async throws {
        let content = Self.content(32 << 20, seed: 31)
        try Data(content).write(to: URL(fileURLWithPath: www.path + "/long.bin"))
        try Data(Self.content(80 << 20, seed: 32)).write(to: URL(fileURLWithPath: www.path + "/interactive.bin"))
        try await until("the server in the namespace answers") {
            try await run(["ip", "netns", "exec", namespace, "curl", "-s", "-o", "/dev/null", "-r", "0-0", url("long.bin")]).status == 0
        }
        let task = try await start(url("long.bin"), directory.file("long.bin"), ["background": .boolean(true)])
        let background = try await property(task, "Background")
        XCTAssertEqual(background, .boolean(true))
        try await waitBytes(task, atLeast: 2 << 20)

        // Another download on the same link: the background task gives way and says so.
        let command = ["ip", "netns", "exec", namespace, "curl", "-s", "-o", "/dev/null", "--max-time", "6", url("interactive.bin")]
        let competitor = Task { try await ProcessRunner.run(command, timeout: 30) }
        try await until("WaitingFor says yielding while curl runs", seconds: 6) {
            try await property(task, "WaitingFor")?.stringValue == "yielding"
        }
        _ = try await competitor.value
        try await until("WaitingFor is empty again once curl is done", seconds: 15) {
            let state = try await property(task, "State")?.stringValue
            if state == "finished" { return true }
            return try await property(task, "WaitingFor")?.stringValue == ""
        }
        try await waitState(task, ["finished"], seconds: 120)
        XCTAssertEqual(sha256(ofFile: directory.file("long.bin")), Self.sha256(content))
        let ctl = PackageRoot.debugBinary("downloadsctl")
        let status = try await run([ctl, "--address", bus.address, "status", String(task.rawValue.split(separator: "/").last ?? "")])
        XCTAssertTrue(status.stdout.contains("background:  yes"), status.stdout)
    }
}
