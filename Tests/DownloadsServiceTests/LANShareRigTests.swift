import DBus
import Foundation
import LANShare
import TestSupport
import XCTest

/// Sharing between two machines of one link (`AvahiRig`: two network namespaces, each with its
/// own system bus and avahi-daemon): the daemon runs on host A (its origin on A's loopback), and
/// host B finds a shared file by its subtype and fetches it from A as Passim's client does
/// (`curl -k https://A:PORT/NAME?sha256=H`), then finds nothing once it is withdrawn.
final class LANShareRigTests: DaemonTestCase {
    var rig: AvahiRig!
    var origin: ChildProcess?
    var sharePort = 0
    override var launcher: [String] { ["ip", "netns", "exec", rig.a.namespace] }
    override var extraArguments: [String] { ["--share-port", String(sharePort)] }

    override func setUp() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: makes network namespaces") }
        rig = try AvahiRig()
        sharePort = try FreePort.pick()
        daemonEnvironment["DBUS_SYSTEM_BUS_ADDRESS"] = rig.a.busAddress
        try await super.setUp()
    }

    override func tearDown() async throws {
        origin?.stop()
        try await super.tearDown()
        rig?.stop()
    }

    func testHostBFindsASharedFileByItsHashAndFetchesItFromHostA() async throws {
        let www = directory.file("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let content = Self.content(3_000_000, seed: 781)
        let hash = Self.sha256(content)
        FileManager.default.createFile(atPath: www + "/update.bin", contents: Data(content))
        let originPort = try FreePort.pick()
        origin = try ChildProcess([
            "ip", "netns", "exec", rig.a.namespace, "python3", "-m", "http.server", "--bind", "127.0.0.1",
            "--directory", www, String(originPort),
        ])
        try await until("the origin on A's loopback answers") {
            (try await rig.run(in: rig.a, ["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:\(originPort)/"])).status
                == 0
        }
        let task = try await start(
            "http://127.0.0.1:\(originPort)/update.bin", directory.file("update.bin"),
            ["checksum": .string("sha256:\(hash)"), "share": .boolean(true)])
        let state = try await waitState(task, ["finished", "failed"])
        XCTAssertEqual(state, "finished")

        // B browses for the file's subtype and resolves it to A.
        var resolved = ""
        try await until("B resolves the file's subtype", seconds: 20) {
            let out = try await rig.run(in: rig.b, ["avahi-browse", "-rpt", AvahiPublisher.subtype(hash)])
            resolved = out.stdout.split(separator: "\n").first { $0.hasPrefix("=") }.map(String.init) ?? ""
            return !resolved.isEmpty
        }
        let fields = resolved.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
        XCTAssertGreaterThanOrEqual(fields.count, 10, resolved)
        guard fields.count >= 10 else { return }
        XCTAssertEqual(fields[7], rig.a.address, resolved)
        XCTAssertEqual(fields[8], String(sharePort), resolved)
        XCTAssertEqual(fields[9], "\"ranges=1\"", resolved)

        // Fetched from A by B as Passim's client does.
        let fetched = directory.file("from-a.bin")
        let curl = try await rig.run(
            in: rig.b,
            [
                "curl", "-sk", "--max-time", "20", "-o", fetched, "-w", "%{http_code}",
                "https://\(fields[7]):\(fields[8])/update.bin?sha256=\(hash)",
            ])
        XCTAssertEqual(curl.stdout, "200", curl.description)
        XCTAssertEqual(sha256(ofFile: fetched), hash)

        _ = try await call("Unshare", [.string(hash)])
        try await until("the advert is gone from B", seconds: 20) {
            let out = try await rig.run(in: rig.b, ["avahi-browse", "-pt", "_cache._tcp"])
            return !out.stdout.contains("Downloads-")
        }
    }
}
