import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The system daemon with exactly the capabilities the shipped unit leaves it
/// (`CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_KILL`): no `CAP_SYS_PTRACE`, no
/// `CAP_DAC_OVERRIDE`. It cannot open another uid's `/proc/PID/root` itself, yet it tells a
/// Flatpak app of nobody from nobody's host process: `/.flatpak-info` is opened by nobody's own
/// file helper, as xdg-desktop-portal (running as the user) opens it.
final class LeastPrivilegeTests: SystemBusTestCase {
    override var launcher: [String] {
        ["setpriv", "--bounding-set=-all,+setuid,+setgid,+kill", "--inh-caps=-all", "--"]
    }

    func testTheUnitsThreeCapabilitiesIdentifyEveryCaller() async throws {
        chmod(directory.path, 0o755)
        // The daemon holds the unit's three capabilities and nothing else.
        let pid = try XCTUnwrap(daemonPID())
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let effective =
            try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("CapEff:") }).split(separator: "\t").last
            ?? ""
        let setgid: UInt64 = 1 << 6, setuid: UInt64 = 1 << 7, kill: UInt64 = 1 << 5
        XCTAssertEqual(UInt64(effective, radix: 16), setgid | setuid | kill, status)

        let app = try await FlatpakApp(
            id: "org.example.Player", busAddress: bus.address, busDirectory: bus.directory.path, systemBus: true,
            uid: 65534,
            directory: directory
        )
        defer { app.stop() }
        let content = Self.content(200_000, seed: 3)
        http.set("/song.ogg", Route(content: content))
        let started = try await app.send([
            "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "song.ogg",
        ])
        let task = try ObjectPath(XCTUnwrap(started.value as? String, "\(started): \(daemonLogText)"))
        let owner = try await property(task, "App")?.stringValue
        XCTAssertEqual(owner, "org.example.Player", "the app is known without CAP_SYS_PTRACE")
        try await until("the app's task finishes") {
            try await app.send(["op": "get", "path": task.rawValue, "prop": "State"]).value as? String == "finished"
        }
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/song.ogg"), Self.sha256(content))

        // Nobody's host process is the host, not refused.
        let host = try await asNobody(
            """
            import dbus
            bus = dbus.bus.BusConnection('\(bus.address)')
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            print(len(m.ListTasks('')))
            """)
        XCTAssertEqual(host.status, 0, host.description + daemonLogText)
        XCTAssertEqual(
            host.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "1", "nobody's host caller sees the app's task"
        )
    }

    var daemonLogText: String { (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "" }

    /// The daemon's pid: the bus's owner of its name.
    func daemonPID() throws -> UInt32? {
        let output = try ProcessRunner.runBlocking([
            "busctl", "--address", bus.address, "status", "org.example.Downloads",
        ]).stdout
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("PID=") }) else { return nil }
        return UInt32(line.dropFirst(4))
    }
}
