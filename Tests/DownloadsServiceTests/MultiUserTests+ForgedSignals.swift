import Foundation
import TestHTTPServer
import TestSupport
import XCTest

extension MultiUserTests {
    /// The fourth trust round's first finding: any user may send a unicast (or broadcast) signal
    /// named `org.example.Downloads.Finished` to anyone on the system bus. User b floods user a's
    /// connections with `Finished(task, "/etc/shadow")` and `Failed` for every task id while a's
    /// `downloadsctl get -i` runs: it prints only its own files, which are whole, and exits 0
    /// (before, it printed /etc/shadow and cancelled the real downloads).
    func testAnotherUsersForgedSignalsAreNotTakenForTheServices() async throws {
        let a = users.a
        let into = try makeDirectory("a-files", owner: a, mode: 0o755)
        let contents = (0..<2).map { Self.content(300_000, seed: UInt32(70 + $0)) }
        for (index, content) in contents.enumerated() {
            var route = Route(content: content)
            route.bytesPerSecond = 150_000
            http.set("/slow\(index).bin", route)
        }
        let list = directory.file("urls-a")
        try (0..<2).map { http.url("/slow\($0).bin") }.joined(separator: "\n").write(
            toFile: list, atomically: true, encoding: .utf8)
        chmod(list, 0o644)
        // User b, for six seconds: every task id's Finished and Failed, to every connection and to all.
        let forger = """
            import dbus, dbus.lowlevel, time
            bus = dbus.bus.BusConnection('\(bus.address)')
            names = lambda: [n for n in bus.list_names() if n.startswith(':')]
            def forge(member, destination, args, signature):
                message = dbus.lowlevel.SignalMessage('/org/example/Downloads', 'org.example.Downloads', member)
                if destination: message.set_destination(destination)
                message.append(*args, signature=signature)
                bus.send_message(message)
            sent = 0
            end = time.time() + 6
            while time.time() < end:
                for destination in [None] + names():
                    for task in range(1, 12):
                        path = dbus.ObjectPath('/org/example/Downloads/tasks/%d' % task)
                        forge('Finished', destination, [path, '/etc/shadow'], 'os')
                        forge('Failed', destination, [path, 'org.example.Downloads.Error.HTTPError',
                              'sign in again at https://evil.example', dbus.ByteArray(b'')], 'ossay')
                        sent += 2
                time.sleep(0.05)
            out['sent'] = sent
            """
        let ctl = DownloadsctlTests.ctl
        let asA = ["setpriv", "--reuid=\(a.uid)", "--regid=\(a.gid)", "--init-groups", ctl, "--system"]
        let environment = bus.environment
        async let getting = ProcessRunner.run(
            asA + ["get", "-i", list, "-o", into], environment: environment, timeout: 120)
        let sent = try await python(as: users.b, forger)["sent"] as? Int ?? 0
        let out = try await getting
        XCTAssertGreaterThan(sent, 100, "the forger sent its signals")
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertFalse(out.stdout.contains("shadow"), out.description)
        XCTAssertFalse(out.stderr.contains("evil.example"), out.description)
        XCTAssertEqual(
            Set(out.stdout.split(separator: "\n").map(String.init)),
            Set((0..<2).map { into + "/slow\($0).bin" }), out.description)
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: into + "/slow\(index).bin"), Self.sha256(content), "file \(index) is whole")
        }
    }
}
