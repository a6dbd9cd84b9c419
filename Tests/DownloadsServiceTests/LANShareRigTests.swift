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
    var servers: [ChildProcess] = []
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
        for server in servers { server.stop() }
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
        let logB = directory.file("daemon-b.log")
        let clientB = try await startDaemonOnB(log: logB)
        let clientA = client
        // The helpers below talk to `client`: B's daemon for the rest of this test.
        client = clientB
        defer {
            client = clientA
            clientB.close()
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

    /// B's own daemon (`--lan-peers fetch`), its own session bus as its service bus and B's
    /// system bus for Avahi; a connection to it once it has its name.
    func startDaemonOnB(log: String) async throws -> Connection {
        let bus = try PrivateBus()
        busB = bus
        daemonB = try ChildProcess(
            [
                "ip", "netns", "exec", rig.b.namespace, "/bin/sh", "-c", "exec \"$0\" \"$@\" 2>>\(log)",
                DaemonTestCase.binary, "--state-dir", directory.file("state-b"), "--address", bus.address,
                "--exit-idle-time", "0", "--lan-peers", "fetch",
            ],
            environment: bus.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": rig.b.busAddress]) { $1 })
        let connection = try await Connection.open(.address(bus.address))
        try await until("B's daemon takes its name", log: log) {
            try await connection.nameOwner("org.example.Downloads") != nil
        }
        return connection
    }

    /// nginx in `host`'s namespace serving `root` on its loopback (`rate`: .deb files sent at
    /// that nginx `limit_rate`), its access log `$request_uri $status $body_bytes_sent`.
    func nginx(in host: AvahiRig.Host, root: String, rate: String?) async throws -> (port: Int, log: String) {
        let port = try FreePort.pick()
        let work = directory.file("nginx-\(host.namespace)")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let config = """
            user root;
            worker_processes 1;
            pid \(work)/nginx.pid;
            error_log \(work)/error.log;
            events { worker_connections 64; }
            http {
                default_type application/octet-stream;
                log_format sent '$request_uri $status $body_bytes_sent';
                access_log \(work)/access.log sent;
                client_body_temp_path \(work); proxy_temp_path \(work); fastcgi_temp_path \(work);
                uwsgi_temp_path \(work); scgi_temp_path \(work);
                server {
                    listen 127.0.0.1:\(port);
                    root \(root);
                    \(rate.map { "location ~ [.]deb$ { limit_rate \($0); }" } ?? "")
                }
            }
            """
        try config.write(toFile: work + "/nginx.conf", atomically: true, encoding: .utf8)
        servers.append(
            try ChildProcess([
                "ip", "netns", "exec", host.namespace, "nginx", "-p", work, "-c", work + "/nginx.conf", "-g",
                "daemon off;",
            ]))
        try await until("nginx in \(host.namespace) answers") {
            (try await rig.run(in: host, ["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:\(port)/Release"]))
                .status == 0
        }
        return (port, work + "/access.log")
    }

    /// apt, unmodified, on both machines through the method: host A's `apt-get download` with
    /// `Acquire::downloads::Share` offers the package it fetched (and then moved out of
    /// `partial/`); host B's, with `Acquire::downloads::LanPeers`, from a 1 MB/s mirror of the same
    /// repository, takes it mostly from A, right.
    func testAptOnHostBTakesAPackageFromHostA() async throws {
        let repo = directory.file("repo")
        try FileManager.default.createDirectory(atPath: repo, withIntermediateDirectories: true)
        let deb = try await makePackage("peer-pkg", payload: Self.content(12 << 20, seed: 783), into: repo)
        let indexed = try await run([
            "sh", "-c", "cd '\(repo)' && apt-ftparchive packages . > Packages && apt-ftparchive release . > Release",
        ])
        XCTAssertEqual(indexed.status, 0, indexed.stderr)
        let onA = try await nginx(in: rig.a, root: repo, rate: nil)
        let onB = try await nginx(in: rig.b, root: repo, rate: "1m")

        func apt(
            _ host: AvahiRig.Host, _ root: AptRoot, _ command: [String], bus: String, extra: [String] = []
        ) async throws -> ProcessRunner.Output {
            let cwd = root.root + "/cwd"
            try FileManager.default.createDirectory(atPath: cwd, withIntermediateDirectories: true)
            return try await ProcessRunner.run(
                ["ip", "netns", "exec", host.namespace, "sh", "-c", "cd '\(cwd)' && exec \"$@\"", "sh"]
                    + root.arguments(command, extra: extra),
                environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus], timeout: 120)
        }
        let aptA = try makeAptRoot(
            sources: "deb [trusted=yes] downloads+http://127.0.0.1:\(onA.port) ./\n", name: "apt-a")
        let updateA = try await apt(rig.a, aptA, ["update"], bus: bus.address)
        XCTAssertEqual(updateA.status, 0, updateA.description)
        let gotA = try await apt(
            rig.a, aptA, ["download", "peer-pkg"], bus: bus.address, extra: ["Acquire::downloads::Share=true"])
        XCTAssertEqual(gotA.status, 0, gotA.description)
        XCTAssertEqual(sha256(ofFile: aptA.root + "/cwd/peer-pkg_1.0_all.deb"), Self.sha256(deb))
        try await until("A shares the package") {
            let reply = try await self.call("ListShared")
            return "\(reply)".contains(Self.sha256(deb))
        }

        let logB = directory.file("daemon-b.log")
        let clientB = try await startDaemonOnB(log: logB)
        defer { clientB.close() }
        let busBAddress = try XCTUnwrap(busB?.address)
        let aptB = try makeAptRoot(
            sources: "deb [trusted=yes] downloads+http://127.0.0.1:\(onB.port) ./\n", name: "apt-b")
        let updateB = try await apt(rig.b, aptB, ["update"], bus: busBAddress)
        XCTAssertEqual(updateB.status, 0, updateB.description)
        let gotB = try await apt(
            rig.b, aptB, ["download", "peer-pkg"], bus: busBAddress, extra: ["Acquire::downloads::LanPeers=true"])
        XCTAssertEqual(gotB.status, 0, gotB.description + ((try? String(contentsOfFile: logB, encoding: .utf8)) ?? ""))
        XCTAssertEqual(sha256(ofFile: aptB.root + "/cwd/peer-pkg_1.0_all.deb"), Self.sha256(deb))
        let sentByB = (try String(contentsOfFile: onB.log, encoding: .utf8)).split(separator: "\n")
            .filter { $0.contains(".deb") }.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
            .reduce(0, +)
        XCTAssertLessThan(
            sentByB, deb.count / 2, "B's mirror sent \(sentByB) of \(deb.count) bytes: the rest came from A")
    }
}
