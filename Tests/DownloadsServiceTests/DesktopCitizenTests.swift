import DBus
import DownloadsAPI
import Foundation
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// The daemon on the desktop's system services, with python-dbusmock's `logind` and
/// `networkmanager` templates on the private system bus (started after the daemon, as after a
/// restart of theirs): the sleep inhibitor follows the transfers and is released after a
/// checkpoint before sleep; tasks wait offline and on metered networks and go on after.
final class DesktopCitizenTests: SystemBusTestCase {
    /// No periodic checkpoint during the test: only the one before sleep makes bytes durable.
    override var extraArguments: [String] { ["--checkpoint-interval", "600", "--share-port", String(sharePort)] }
    /// The share server's port (files shared while the network is or is not metered).
    let sharePort = (try? FreePort.pick()) ?? 27_599

    func mockCall(
        _ name: String, _ path: String, _ interface: String, _ method: String, _ arguments: [String]
    ) async throws -> String {
        let output = try await run(
            ["busctl", "--address=\(bus.address)", "call", name, path, interface, method] + arguments)
        XCTAssertEqual(output.status, 0, "\(method): \(output.stderr)")
        return output.stdout
    }

    private func inhibitors() async throws -> String {
        try await mockCall(
            "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "ListInhibitors", [])
    }

    private func emitPrepareForSleep(_ starting: Bool) async throws {
        _ = try await mockCall(
            "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock", "EmitSignal",
            [
                "sssav", "org.freedesktop.login1.Manager", "PrepareForSleep", "b", "1", "b",
                starting ? "true" : "false",
            ])
    }

    func durableOffset(_ id: Int64) async throws -> Int64 {
        try await DatabaseQueue(path: stateDirectory + "/downloads.sqlite").read { db in
            try Int64.fetchOne(db, sql: "SELECT durableOffset FROM task WHERE id = ?", arguments: [id]) ?? -1
        }
    }

    func waitingFor(_ task: ObjectPath) async throws -> String {
        try await property(task, "WaitingFor")?.stringValue ?? "?"
    }

    // MARK: logind

    func testInhibitorIsHeldWhileTransfersRunAndReleasedAfterACheckpointBeforeSleep() async throws {
        _ = try await startMock("logind", name: "org.freedesktop.login1")
        let initial = try await inhibitors()
        XCTAssertFalse(initial.contains("Downloads"), "no transfer, no lock")

        let content = Self.content(3_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 400_000
        http.set("/slow", route)
        let target = directory.file("slow.bin")
        let task = try await start(http.url("/slow"), target)
        try await waitState(task, ["running"])
        try await until("the inhibitor") {
            try await self.inhibitors().contains(
                "\"sleep:shutdown\" \"Downloads\" \"1 download in progress\" \"delay\"")
        }

        // A PrepareForSleep from someone other than logind changes nothing.
        let forged = try await asNobody(
            """
            import dbus
            bus = dbus.SystemBus()
            msg = dbus.lowlevel.SignalMessage('/org/freedesktop/login1', 'org.freedesktop.login1.Manager', 'PrepareForSleep')
            msg.append(True, signature='b')
            bus.send_message(msg)
            bus.flush()
            """)
        XCTAssertEqual(forged.status, 0, forged.stderr)
        try await Task.sleep(for: .milliseconds(300))
        let afterForgery = try await inhibitors()
        XCTAssertTrue(afterForgery.contains("Downloads"), "a forged PrepareForSleep released the lock")
        let early = try await durableOffset(1)
        XCTAssertEqual(early, 0, "nothing checkpointed yet (interval 600 s)")

        try await waitBytes(task, atLeast: 500_000)
        let beforeValue = try await property(task, "BytesWritten")?.int64Value
        let before = try XCTUnwrap(beforeValue)
        try await emitPrepareForSleep(true)
        try await until("the lock released") { try await !self.inhibitors().contains("Downloads") }
        // Released only after the checkpoint reached the database.
        let durable = try await durableOffset(1)
        XCTAssertGreaterThanOrEqual(durable, before, "the bytes received before sleep are durable")
        let stateAsleep = try await property(task, "State")?.stringValue
        XCTAssertEqual(stateAsleep, "running", "transfers carry on")

        // While asleep no lock is taken again, however the transfers change.
        try await Task.sleep(for: .milliseconds(300))
        let asleep = try await inhibitors()
        XCTAssertFalse(asleep.contains("Downloads"))

        try await emitPrepareForSleep(false)
        try await until("the lock taken again") { try await self.inhibitors().contains("Downloads") }
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        try await until("the lock released at the end") { try await !self.inhibitors().contains("Downloads") }
    }

    func testOnWakeATransferWaitingToRetryGoesAtOnce() async throws {
        _ = try await startMock("logind", name: "org.freedesktop.login1")
        let content = Self.content(200_000, seed: 11)
        var route = Route(content: content)
        route.failFirst = (count: 1, status: 503, retryAfter: "120")
        http.set("/busy", route)
        let task = try await start(http.url("/busy"), directory.file("busy.bin"))
        try await waitState(task, ["retrying"])
        // Retry-After asks for two minutes; the wake-up cuts it short.
        try await emitPrepareForSleep(false)
        try await waitState(task, ["finished"], seconds: 30)
        XCTAssertEqual(sha256(ofFile: directory.file("busy.bin")), Self.sha256(content))
    }

    // MARK: NetworkManager

    private func setConnectivity(_ value: Int) async throws {
        _ = try await mockCall(
            "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock",
            "SetConnectivity", ["u", String(value)])
    }

    /// How often the daemon's log says `text` so far.
    func daemonLogCount(_ text: String) -> Int {
        ((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "").components(separatedBy: text).count - 1
    }

    /// Runs `change` (a mock's property set) and waits until the daemon has taken it in: its log
    /// says `applied` once more. A Start sent before that would race the daemon's reading.
    func changeAndWait(until applied: String, _ change: () async throws -> Void) async throws {
        let before = daemonLogCount(applied)
        try await change()
        try await until("the daemon to log '\(applied)'") { self.daemonLogCount(applied) > before }
    }

    private func setMetered(_ value: Int) async throws {
        _ = try await mockCall(
            "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock",
            "SetProperty",
            [
                "sssv", "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager", "Metered", "u",
                String(value),
            ])
    }

    func testTasksWaitOfflineAndGoOnWhenTheNetworkComesBack() async throws {
        let nm = try await startMock("networkmanager", name: "org.freedesktop.NetworkManager")
        try await changeAndWait(until: "network: offline") { try await setConnectivity(1) }  // none
        let content = Self.content(1_500_000, seed: 3)
        http.set("/file", Route(content: content))
        let first = try await start(http.url("/file"), directory.file("first.bin"))
        try await until("WaitingFor network") { try await self.waitingFor(first) == "network" }
        try await Task.sleep(for: .milliseconds(300))
        let firstState = try await property(first, "State")?.stringValue
        XCTAssertEqual(firstState, "queued")
        XCTAssertTrue(http.requests(for: "/file").isEmpty, "no request while offline")

        try await setConnectivity(4)  // full
        try await waitState(first, ["finished"])
        let firstWaiting = try await waitingFor(first)
        XCTAssertEqual(firstWaiting, "")
        XCTAssertEqual(sha256(ofFile: directory.file("first.bin")), Self.sha256(content))

        // Going offline during a transfer: back to the queue with its bytes, on again after.
        var slow = Route(content: content)
        slow.bytesPerSecond = 300_000
        http.set("/slow", slow)
        let second = try await start(http.url("/slow"), directory.file("second.bin"))
        try await waitBytes(second, atLeast: 200_000)
        try await setConnectivity(2)  // behind a captive portal: offline too
        try await waitState(second, ["queued"])
        let secondWaiting = try await waitingFor(second)
        XCTAssertEqual(secondWaiting, "network")
        let kept = try await durableOffset(2)
        XCTAssertGreaterThan(kept, 0, "the transfer was checkpointed when it stopped")
        try await setConnectivity(4)
        try await waitState(second, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("second.bin")), Self.sha256(content))
        let ranges = http.requests(for: "/slow").compactMap(\.range)
        XCTAssertEqual(ranges, ["bytes=\(kept)-"], "it went on from its checkpoint")
        XCTAssertFalse(signalNames(for: second).contains("Failed"), "no retries burnt, no failure")

        // Without NetworkManager nothing waits.
        try await changeAndWait(until: "network: offline") { try await setConnectivity(1) }
        let third = try await start(http.url("/file"), directory.file("third.bin"))
        try await until("WaitingFor network") { try await self.waitingFor(third) == "network" }
        nm.stop()
        try await waitState(third, ["finished"])
    }

    func testSharedFilesAreNotOfferedWhileTheNetworkIsMetered() async throws {
        _ = try await startMock("networkmanager", name: "org.freedesktop.NetworkManager")
        _ = try await mockCall(
            "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock",
            "AddProperty", ["ssv", "org.freedesktop.NetworkManager", "Metered", "u", "2"])
        let content = Self.content(500_000, seed: 9)
        let hash = Self.sha256(content)
        http.set("/shared.bin", Route(content: content))
        let task = try await start(
            http.url("/shared.bin"), directory.file("shared.bin"),
            ["checksum": .string("sha256:\(hash)"), "share": .boolean(true)])
        try await waitState(task, ["finished"])
        func fetched() async throws -> String {
            try await run([
                "curl", "-sk", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                "https://127.0.0.1:\(sharePort)/shared.bin?sha256=\(hash)",
            ]).stdout
        }
        try await until("the file is served") { try await fetched() == "200" }

        try await changeAndWait(until: "the network is metered: shared files are not offered") {
            try await setMetered(1)
        }
        let whileMetered = try await fetched()
        XCTAssertEqual(whileMetered, "000", "nothing listens while the network is metered")
        let listed = try await call("ListShared")
        XCTAssertTrue("\(listed)".contains(hash), "still shared, offered again later: \(listed)")

        try await changeAndWait(until: "shared files are offered again") { try await setMetered(2) }
        try await until("the file is served again") { try await fetched() == "200" }
    }

    func testTasksThatMustNotUseAMeteredNetworkWaitForAnotherOne() async throws {
        _ = try await startMock("networkmanager", name: "org.freedesktop.NetworkManager")
        // The template has no Metered: add it, as NetworkManager 1.2+ has it (1 = yes).
        _ = try await mockCall(
            "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock",
            "AddProperty", ["ssv", "org.freedesktop.NetworkManager", "Metered", "u", "1"])
        try await changeAndWait(until: "network: online (metered)") { try await setMetered(1) }
        let content = Self.content(1_000_000, seed: 5)
        http.set("/file", Route(content: content))
        // Started with downloadsctl: --no-metered is allow_metered false.
        let ctl = DownloadsctlTests.ctl
        let started = try await run([
            ctl, "--system", "start", http.url("/file"), directory.file("careful.bin"), "--no-metered",
            "--desktop-entry", "org.example.Test.desktop",
        ])
        XCTAssertEqual(started.status, 0, started.stderr)
        let careful = DownloadsAPI.taskPath(
            try XCTUnwrap(UInt64(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines))))
        let anyway = try await start(http.url("/file"), directory.file("anyway.bin"))
        try await until("WaitingFor unmetered-network") { try await self.waitingFor(careful) == "unmetered-network" }
        try await waitState(anyway, ["finished"])
        let carefulState = try await property(careful, "State")?.stringValue
        XCTAssertEqual(carefulState, "queued")
        let entry = try await property(careful, "DesktopEntry")?.stringValue
        XCTAssertEqual(entry, "org.example.Test.desktop")
        let status = try await run([
            ctl, "--system", "status", started.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "--json",
        ])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(object["waiting_for"] as? String, "unmetered-network")
        let table = try await run([ctl, "--system", "list"])
        XCTAssertTrue(table.stdout.contains("waiting (unmetered-network)"), table.stdout)

        try await setMetered(4)  // guess-no
        try await waitState(careful, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("careful.bin")), Self.sha256(content))

        // A running careful transfer stops when the network becomes metered (guess-yes).
        var slow = Route(content: content)
        slow.bytesPerSecond = 250_000
        http.set("/slow", slow)
        let third = try await start(http.url("/slow"), directory.file("third.bin"), ["allow_metered": .boolean(false)])
        try await waitBytes(third, atLeast: 100_000)
        try await setMetered(3)
        try await waitState(third, ["queued"])
        let thirdWaiting = try await waitingFor(third)
        XCTAssertEqual(thirdWaiting, "unmetered-network")
        // The owner allows it after all (ResumeWithData with options changes a live task).
        let blob = try await client.call(
            destination: "org.example.Downloads", path: third, interface: "org.example.Downloads.Task", method: "Pause"
        )
        _ = try await call("ResumeWithData", [blob[0], .vardict(["allow_metered": .boolean(true)])])
        try await waitState(third, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("third.bin")), Self.sha256(content))
    }
}
