import DBus
import DownloadsAPI
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Power: python-dbusmock's `upower` template unplugging and plugging in mid-download, and its
/// `power_profiles_daemon` template choosing the power-saver profile.
extension DesktopCitizenTests {
    private func setOnBattery(_ onBattery: Bool) async throws {
        _ = try await mockCall(
            "org.freedesktop.UPower", "/org/freedesktop/UPower", "org.freedesktop.DBus.Properties", "Set",
            ["ssv", "org.freedesktop.UPower", "OnBattery", "b", onBattery ? "true" : "false"])
    }

    private func setProfile(_ profile: String) async throws {
        _ = try await mockCall(
            "net.hadess.PowerProfiles", "/net/hadess/PowerProfiles", "org.freedesktop.DBus.Properties", "Set",
            ["ssv", "net.hadess.PowerProfiles", "ActiveProfile", "s", profile])
    }

    func testTasksThatRequireMainsPowerWaitOnBatteryAndPauseWhenUnplugged() async throws {
        let content = Self.content(1_200_000, seed: 11)
        http.set("/file", Route(content: content))
        // Without UPower the machine counts as on mains power.
        let early = try await start(
            http.url("/file"), directory.file("early.bin"), ["requires_ac_power": .boolean(true)])
        try await waitState(early, ["finished"])

        _ = try await startMock("upower", name: "org.freedesktop.UPower")
        try await changeAndWait(until: "power: on battery") { try await setOnBattery(true) }
        // Started with downloadsctl --requires-ac-power, while on battery: it waits; others run.
        let started = try await run([
            DownloadsctlTests.ctl, "--system", "start", http.url("/file"), directory.file("careful.bin"),
            "--requires-ac-power",
        ])
        XCTAssertEqual(started.status, 0, started.stderr)
        let careful = DownloadsAPI.taskPath(
            try XCTUnwrap(UInt64(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines))))
        let anyway = try await start(http.url("/file"), directory.file("anyway.bin"))
        try await until("WaitingFor ac-power") { try await self.waitingFor(careful) == "ac-power" }
        try await waitState(anyway, ["finished"])
        let carefulState = try await property(careful, "State")?.stringValue
        XCTAssertEqual(carefulState, "queued")
        let list = try await run([DownloadsctlTests.ctl, "--system", "list"])
        XCTAssertTrue(list.stdout.contains("waiting (ac-power)"), list.stdout)
        try await setOnBattery(false)
        try await waitState(careful, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("careful.bin")), Self.sha256(content))

        // Unplugged mid-download: checkpointed and queued (not cancelled), on again when plugged in.
        var slow = Route(content: content)
        slow.bytesPerSecond = 300_000
        http.set("/slow", slow)
        let running = try await start(
            http.url("/slow"), directory.file("running.bin"), ["requires_ac_power": .boolean(true)])
        let id = Int64(try XCTUnwrap(DownloadsAPI.taskID(running)))
        try await waitBytes(running, atLeast: 200_000)
        try await setOnBattery(true)
        try await waitState(running, ["queued"])
        let waiting = try await waitingFor(running)
        XCTAssertEqual(waiting, "ac-power")
        let kept = try await durableOffset(id)
        XCTAssertGreaterThan(kept, 0, "the transfer was checkpointed when it stopped")
        try await setOnBattery(false)
        try await waitState(running, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("running.bin")), Self.sha256(content))
        let ranges = http.requests(for: "/slow").compactMap(\.range)
        XCTAssertEqual(ranges, ["bytes=\(kept)-"], "it went on from its checkpoint")
        XCTAssertFalse(signalNames(for: running).contains("Failed"), "no failure, no retries burnt")

        // Update changes it on a live task: true on battery stops it; false lets it run.
        http.set("/slow2", slow)
        let steered = try await start(http.url("/slow2"), directory.file("steered.bin"))
        try await waitBytes(steered, atLeast: 100_000)
        try await setOnBattery(true)
        _ = try await client.call(
            destination: "org.example.Downloads", path: steered, interface: "org.example.Downloads.Task",
            method: "Update", arguments: [.vardict(["requires_ac_power": .boolean(true)])])
        try await waitState(steered, ["queued"])
        let steeredWaiting = try await waitingFor(steered)
        XCTAssertEqual(steeredWaiting, "ac-power")
        let set = try await run([
            DownloadsctlTests.ctl, "--system", "set", "\(try XCTUnwrap(DownloadsAPI.taskID(steered)))",
            "--requires-ac-power", "no",
        ])
        XCTAssertEqual(set.status, 0, set.stderr)
        try await waitState(steered, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("steered.bin")), Self.sha256(content))
    }

    func testThePowerSaverProfileHoldsBackgroundTasks() async throws {
        _ = try await startMock("power_profiles_daemon", name: "net.hadess.PowerProfiles")
        try await changeAndWait(until: "power-saver profile") { try await setProfile("power-saver") }
        let content = Self.content(600_000, seed: 12)
        http.set("/file", Route(content: content))
        let background = try await start(
            http.url("/file"), directory.file("background.bin"), ["background": .boolean(true)])
        let foreground = try await start(http.url("/file"), directory.file("foreground.bin"))
        try await until("WaitingFor power-saver") { try await self.waitingFor(background) == "power-saver" }
        try await waitState(foreground, ["finished"])
        let state = try await property(background, "State")?.stringValue
        XCTAssertEqual(state, "queued")
        try await setProfile("balanced")
        try await waitState(background, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("background.bin")), Self.sha256(content))

        // Chosen while a background transfer runs: it stops with its bytes and goes on after.
        var slow = Route(content: content)
        slow.bytesPerSecond = 200_000
        http.set("/slow", slow)
        let running = try await start(http.url("/slow"), directory.file("running.bin"), ["background": .boolean(true)])
        try await waitBytes(running, atLeast: 100_000)
        try await setProfile("power-saver")
        try await waitState(running, ["queued"])
        let waiting = try await waitingFor(running)
        XCTAssertEqual(waiting, "power-saver")
        try await setProfile("performance")
        try await waitState(running, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("running.bin")), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/slow").count, 2, "one request before, one (ranged) after")
    }
}
