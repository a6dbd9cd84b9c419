import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A user held to `--deny-network` (every user but root on the system bus) gets every checked
/// address of a name, as curl and AsyncHTTPClient try them: `dual.test` is `::1` and `127.0.0.1`
/// (IPv6 first, RFC 6724) and the server listens on IPv4 only, as any host with broken IPv6
/// looks; the refused IPv6 connection moves on to IPv4 at once. The daemon runs in a mount
/// namespace of its own whose `/etc/hosts` names `dual.test` (the host's file is untouched).
final class DualStackTests: SystemBusTestCase {
    static let hosts: String = {
        let path = NSTemporaryDirectory() + "dual-stack-hosts-\(getpid())"
        try? "::1 dual.test\n127.0.0.1 dual.test\n127.0.0.1 localhost\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        return path
    }()

    override var launcher: [String] {
        [
            "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount --bind \"$0\" /etc/hosts && exec \"$@\"", Self.hosts,
        ]
    }

    override class func tearDown() {
        try? FileManager.default.removeItem(atPath: hosts)
        super.tearDown()
    }

    func testAUserHeldToCheckedAddressesFallsBackToIPv4() async throws {
        guard (try? await run(["unshare", "--mount", "true"]))?.status == 0 else {
            throw XCTSkip("needs mount namespaces")
        }
        chmod(directory.path, 0o755)
        let folder = directory.file("nobody")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        chown(folder, 65534, 65534)
        let content = Self.content(300_000, seed: 8)
        http.set("/f.bin", Route(content: content))
        let url = "http://dual.test:\(http.port)/f.bin"
        let output = try await asNobody(
            """
            import dbus, time
            bus = dbus.bus.BusConnection('\(bus.address)')
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            path = m.Start('\(url)', '\(folder)/f.bin', dbus.Dictionary({}, signature='sv'))
            props = dbus.Interface(bus.get_object('org.example.Downloads', path), 'org.freedesktop.DBus.Properties')
            deadline = time.time() + 30
            while time.time() < deadline:
                state = str(props.Get('org.example.Downloads.Task', 'State'))
                if state in ('finished', 'failed'): break
                time.sleep(0.05)
            print(state, str(props.Get('org.example.Downloads.Task', 'ErrorMessage')))
            """)
        let log = (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? ""
        XCTAssertEqual(output.status, 0, output.description)
        XCTAssertTrue(output.stdout.hasPrefix("finished"), output.stdout + log)
        XCTAssertEqual(sha256(ofFile: folder + "/f.bin"), Self.sha256(content))
        XCTAssertTrue(log.contains("trying the next address of dual.test"), "IPv6 was tried first and refused: \(log)")
    }
}
