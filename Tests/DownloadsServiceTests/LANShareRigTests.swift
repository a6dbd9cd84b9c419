import DBus
import Foundation
import LANShare
import TestSupport
import XCTest

/// Sharing between two machines of one link (`AvahiRig`: two network namespaces, each with its
/// own system bus and avahi-daemon): the daemon runs on host A (its origin on A's loopback), and
/// host B finds a shared file by its subtype and fetches it from A as Passim's client does
/// (`curl -k https://A:PORT/NAME?sha256=H`), then finds nothing once it is withdrawn; and B's own
/// daemon, downloading the same file with `lan_peers` from a slow origin on B's loopback, takes
/// it mostly from A, right.
final class LANShareRigTests: DaemonTestCase {
    var rig: AvahiRig!
    var origin: ChildProcess?
    var sharePort = 0
    var originB: ChildProcess?
    var daemonB: ChildProcess?
    var busB: PrivateBus?
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
        originB?.stop()
        daemonB?.stop()
        busB?.stop()
        try await super.tearDown()
        rig?.stop()
    }

    /// `content` served on A's loopback, downloaded by A's daemon with `share`: offered by its hash.
    func shareOnA(_ content: [UInt8], name: String) async throws -> String {
        let www = directory.file("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let hash = Self.sha256(content)
        FileManager.default.createFile(atPath: www + "/" + name, contents: Data(content))
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
            "http://127.0.0.1:\(originPort)/\(name)", directory.file(name),
            ["checksum": .string("sha256:\(hash)"), "share": .boolean(true)])
        let state = try await waitState(task, ["finished", "failed"])
        XCTAssertEqual(state, "finished")
        return hash
    }

    func testHostBFindsASharedFileByItsHashAndFetchesItFromHostA() async throws {
        let content = Self.content(3_000_000, seed: 781)
        let hash = try await shareOnA(content, name: "update.bin")

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

        // An address of a VPN's tun on A: a connection to it is closed before TLS, while the
        // link's address serves.
        for command in [
            ["tuntap", "add", "dev", "tun-dl", "mode", "tun"], ["addr", "add", "10.79.0.1/32", "dev", "tun-dl"],
            ["link", "set", "tun-dl", "up"],
        ] {
            let out = try await run(["ip", "-n", rig.a.namespace] + command)
            XCTAssertEqual(out.status, 0, out.stderr)
        }
        let overTun = try await rig.run(
            in: rig.a,
            [
                "curl", "-sk", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
                "https://10.79.0.1:\(sharePort)/update.bin?sha256=\(hash)",
            ])
        XCTAssertEqual(overTun.stdout, "000", "no answer on a tun's address: \(overTun.description)")
        let overLink = try await rig.run(
            in: rig.a,
            [
                "curl", "-sk", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
                "https://\(rig.a.address):\(sharePort)/update.bin?sha256=\(hash)",
            ])
        XCTAssertEqual(overLink.stdout, "200", overLink.description)

        _ = try await call("Unshare", [.string(hash)])
        try await until("the advert is gone from B", seconds: 20) {
            let out = try await rig.run(in: rig.b, ["avahi-browse", "-pt", "_cache._tcp"])
            return !out.stdout.contains("Downloads-")
        }
    }

    func testHostBsDaemonTakesTheFileMostlyFromHostAWithLanPeers() async throws {
        let content = Self.content(24 << 20, seed: 782)
        let hash = try await shareOnA(content, name: "model.bin")

        // B: the same file's origin on B's loopback at 2 MB/s (a slow uplink), and B's own daemon
        // (its own session bus; B's system bus for Avahi).
        let copy = directory.file("origin-copy.bin")
        FileManager.default.createFile(atPath: copy, contents: Data(content))
        let originPort = try FreePort.pick()
        originB = try ChildProcess([
            "ip", "netns", "exec", rig.b.namespace, "/usr/bin/python3",
            PackageRoot.url.path + "/Tests/servers/lan_peer.py", String(originPort), "-", "-", copy,
            directory.file("origin-b.log"), "origin", "2000000",
        ])
        try await until("the origin on B's loopback answers") {
            (try await rig.run(
                in: rig.b, ["curl", "-s", "-o", "/dev/null", "-r", "0-0", "http://127.0.0.1:\(originPort)/model.bin"]
            )).status == 0
        }
        let bus = try PrivateBus()
        busB = bus
        let logB = directory.file("daemon-b.log")
        daemonB = try ChildProcess(
            [
                "ip", "netns", "exec", rig.b.namespace, "/bin/sh", "-c", "exec \"$0\" \"$@\" 2>>\(logB)",
                DaemonTestCase.binary, "--state-dir", directory.file("state-b"), "--address", bus.address,
                "--exit-idle-time", "0", "--lan-peers", "fetch",
            ],
            environment: bus.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": rig.b.busAddress]) { $1 })
        let clientA = client
        let clientB = try await Connection.open(.address(bus.address))
        // The helpers below talk to `client`: B's daemon for the rest of this test.
        client = clientB
        defer {
            client = clientA
            clientB.close()
        }
        try await until("B's daemon takes its name", log: logB) {
            try await clientB.nameOwner("org.example.Downloads") != nil
        }
        let task = try await start(
            "http://127.0.0.1:\(originPort)/model.bin", directory.file("model-on-b.bin"),
            ["checksum": .string("sha256:\(hash)"), "lan_peers": .boolean(true)])
        let state = try await waitState(task, ["finished", "failed"], seconds: 60)
        XCTAssertEqual(state, "finished", (try? String(contentsOfFile: logB, encoding: .utf8)) ?? "")
        XCTAssertEqual(sha256(ofFile: directory.file("model-on-b.bin")), hash)
        let metrics = try await getMetrics(task)
        guard case .dictionary(_, _, let sources)? = metrics.task["bytes_by_source"] else {
            return XCTFail("no bytes_by_source: \(metrics.task)")
        }
        let bytes = Dictionary(
            sources.compactMap { entry in entry.key.stringValue.map { ($0, entry.value.uint64Value ?? 0) } },
            uniquingKeysWith: +)
        let fromA = bytes["peer:\(rig.a.address)"] ?? 0
        XCTAssertGreaterThan(fromA, UInt64(content.count / 2), "mostly from A: \(bytes)")
    }
}
