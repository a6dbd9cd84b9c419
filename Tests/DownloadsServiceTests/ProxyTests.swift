import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Downloads through real proxies from Debian: tinyproxy (http URLs forwarded, https through
/// CONNECT, with and without Basic credentials, one that refuses tunnels but forwards), microsocks (SOCKS5, names resolved here or by the
/// proxy), a dead proxy port; the daemon's own environment with `no_proxy`; pause and resume
/// through a proxy; credentials never shown.
final class ProxyTests: TLSDaemonTestCase {
    override var extraArguments: [String] { ["--ca-file", tls.certificates.caFile] }

    func failure(_ path: ObjectPath) async throws -> (name: String, message: String) {
        let state = try await waitState(path, ["finished", "failed", "cancelled"])
        XCTAssertEqual(state, "failed")
        return (
            try await property(path, "Error")?.stringValue ?? "",
            try await property(path, "ErrorMessage")?.stringValue ?? ""
        )
    }

    func testAnHTTPProxyForwardsHTTPTunnelsHTTPSAndAsksForItsCredentials() async throws {
        let open = try TinyProxy(in: directory.path)
        defer { open.stop() }
        let guarded = try TinyProxy(in: directory.path, credentials: ("alice", "s3cret"))
        defer { guarded.stop() }
        let content = Self.content(300_000)
        http.set("/p", Route(content: content))
        try tls.file("p.bin", content)

        try await download(
            http.url("/p"), to: directory.file("plain.bin"), expecting: content,
            options: ["proxy": .string(open.url), "headers": .stringDict(["X-App": "podcasts"])])
        XCTAssertEqual(
            open.forwardedRequests, [http.url("/p")], "an http URL is forwarded: the absolute URL in the request line")
        XCTAssertEqual(open.connectRequests, [], "no tunnel for an http URL")
        XCTAssertEqual(
            http.requests(for: "/p").last?.userHeaders["x-app"], "podcasts", "the task's headers reach the server")
        try await download(
            tls.url(.http2, "/p.bin"), to: directory.file("tls.bin"), expecting: content,
            options: ["proxy": .string(open.url)])
        XCTAssertEqual(
            open.connectRequests.last, "localhost:\(tls.port(.http2))", "https: CONNECT, then TLS to the server inside")

        let withPassword = "http://alice:s3cret@127.0.0.1:\(guarded.port)"
        try await download(
            http.url("/p"), to: directory.file("auth.bin"), expecting: content,
            options: ["proxy": .string(withPassword)])
        XCTAssertEqual(guarded.forwardedRequests.count, 1)
        XCTAssertNil(
            http.requests(for: "/p").last?.userHeaders["proxy-authorization"],
            "the proxy's credentials stay with the proxy")
        try await download(
            tls.url(.http1, "/p.bin"), to: directory.file("auth-tls.bin"), expecting: content,
            options: ["proxy": .string(withPassword)])
        XCTAssertEqual(guarded.connectRequests.count, 1, "the tunnel with the same credentials")

        let without = try await start(http.url("/p"), directory.file("noauth.bin"), ["proxy": .string(guarded.url)])
        var (name, message) = try await failure(without)
        XCTAssertEqual(name, "org.example.Downloads.Error.ProxyError")
        XCTAssertTrue(message.contains("http://127.0.0.1:\(guarded.port)") && message.contains("407"), message)
        let noAuthTLS = try await start(
            tls.url(.http1, "/p.bin"), directory.file("noauth-tls.bin"), ["proxy": .string(guarded.url)])
        (name, message) = try await failure(noAuthTLS)
        XCTAssertEqual(name, "org.example.Downloads.Error.ProxyError")
        XCTAssertTrue(message.contains("407"), message)
        // tinyproxy answers wrong credentials with 401 (and WWW-Authenticate), not 407: to a
        // CONNECT, a refused tunnel; to a forwarded request it cannot be told from the server's.
        let wrong = try await start(
            tls.url(.http1, "/p.bin"), directory.file("wrong.bin"),
            ["proxy": .string("http://alice:wrong@127.0.0.1:\(guarded.port)")])
        (name, message) = try await failure(wrong)
        XCTAssertEqual(name, "org.example.Downloads.Error.ProxyError")
        XCTAssertTrue(message.contains("http://127.0.0.1:\(guarded.port)") && !message.contains("wrong"), message)

        // Credentials are secrets: in no property, message, listing or log.
        let all = try await client.call(
            destination: "org.example.Downloads", path: without, interface: "org.freedesktop.DBus.Properties",
            method: "GetAll", arguments: [.string("org.example.Downloads.Task")]
        )
        XCTAssertFalse("\(all)".contains("s3cret") || "\(all)".contains("alice"))
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertFalse(log.contains("s3cret") || log.contains("wrong@"), "the daemon's log holds no proxy password")
    }

    /// `GetMetrics` through a proxy: a forwarded request's own connection to the proxy is timed
    /// (`connect_start`, `connect_end`); a tunnel's readiness holds the proxy's handshake, so it
    /// is left out; the tag that tells a request its connection reaches neither proxy nor server.
    func testMetricsThroughAProxyTimeOnlyWhatIsTheServices() async throws {
        let open = try TinyProxy(in: directory.path)
        defer { open.stop() }
        let content = Self.content(100_000)
        http.set("/m", Route(content: content))
        try tls.file("m.bin", content)
        let forwarded = try await download(
            http.url("/m"), to: directory.file("f.bin"), expecting: content, options: ["proxy": .string(open.url)])
        let plainList = try await getMetrics(forwarded).transactions
        let plain = try XCTUnwrap(plainList.last)
        let started = try XCTUnwrap(plain["connect_start"]?.uint64Value, "\(plain)")
        let connected = try XCTUnwrap(plain["connect_end"]?.uint64Value, "\(plain)")
        XCTAssertTrue(
            (plain["fetch_start"]?.uint64Value ?? .max) <= started && started <= connected
                && connected <= (plain["request_start"]?.uint64Value ?? 0), "\(plain)")
        XCTAssertEqual(plain["reused_connection"]?.boolValue, false)
        XCTAssertEqual(plain["remote_address"]?.stringValue, "127.0.0.1")

        let tunnelled = try await download(
            tls.url(.http1, "/m.bin"), to: directory.file("t.bin"), expecting: content,
            options: ["proxy": .string(open.url)])
        let secureList = try await getMetrics(tunnelled).transactions
        let secure = try XCTUnwrap(secureList.last)
        XCTAssertEqual(secure["reused_connection"]?.boolValue, false, "\(secure)")
        XCTAssertEqual(secure["tls_version"]?.stringValue, tls.requests(for: "/m.bin", on: .http1).last?.tlsVersion)
        for unseen in ["connect_start", "connect_end", "tls_end"] {
            XCTAssertNil(secure[unseen], "\(unseen): the tunnel's readiness is the proxy's too")
        }
        XCTAssertEqual(open.connectRequests.count, 1)
        XCTAssertTrue(
            http.requests(for: "/m").allSatisfy { $0.userHeaders["x-org-example-downloads-transaction"] == nil },
            "\(http.requests(for: "/m").map(\.userHeaders))")
    }

    /// Forwarded requests behave as direct ones: four ranged connections, a redirect followed
    /// through the proxy, a body cut short and fetched again from where it was durable, a stall
    /// caught by the watchdog, a 404 failing without a file, a chunked body.
    func testForwardedRequestsBehaveAsDirectOnes() async throws {
        let proxy = try TinyProxy(in: directory.path)
        defer { proxy.stop() }
        let options: [String: DBusValue] = ["proxy": .string(proxy.url)]
        let big = Self.content(4 << 20, seed: 13)
        var segmented = Route(content: big)
        segmented.bytesPerSecond = 4_000_000
        http.set("/seg", segmented)
        try await download(
            http.url("/seg"), to: directory.file("seg.bin"), expecting: big,
            options: options.merging(["connections": .uint32(4)]) { $1 })
        let ranges = http.requests(for: "/seg").compactMap(\.range)
        XCTAssertGreaterThanOrEqual(ranges.count, 3, "ranged requests through the proxy: \(ranges)")
        XCTAssertEqual(
            proxy.forwardedRequests.filter { $0 == http.url("/seg") }.count, http.requests(for: "/seg").count)

        let small = Self.content(300_000, seed: 14)
        var moved = Route(content: [])
        moved.redirect = (status: 302, location: http.url("/target"))
        http.set("/moved", moved)
        http.set("/target", Route(content: small))
        try await download(http.url("/moved"), to: directory.file("moved.bin"), expecting: small, options: options)
        XCTAssertTrue(
            proxy.forwardedRequests.contains(http.url("/target")), "the redirect was followed through the proxy")

        var cut = Route(content: small)
        cut.closeAfter = 100_000
        cut.misbehaveTimes = 1
        http.set("/cut", cut)
        try await download(http.url("/cut"), to: directory.file("cut.bin"), expecting: small, options: options)
        XCTAssertEqual(http.requests(for: "/cut").count, 2, "cut once, then fetched again")

        var stalled = Route(content: small)
        stalled.stallAfter = 50_000
        stalled.misbehaveTimes = 1
        http.set("/stall", stalled)
        try await download(
            http.url("/stall"), to: directory.file("stall.bin"), expecting: small,
            options: options.merging(["stall_timeout": .uint32(1)]) { $1 })
        XCTAssertEqual(http.requests(for: "/stall").count, 2, "the stall was caught and the request made again")

        var chunked = Route(content: small)
        chunked.chunked = true
        http.set("/chunked", chunked)
        try await download(http.url("/chunked"), to: directory.file("chunked.bin"), expecting: small, options: options)

        let missing = try await start(http.url("/missing"), directory.file("missing.bin"), options)
        let (name, message) = try await failure(missing)
        XCTAssertEqual(name, "org.example.Downloads.Error.HTTPError")
        XCTAssertTrue(message.contains("404"), message)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("missing.bin")))
    }

    /// A proxy may relay a response's head a line per segment (tinyproxy does): the forwarded
    /// request reads on until the head is whole. (It read once and waited for a part that never
    /// came: the watchdog failed the request after `connect_timeout`, here 5 s, and the retry
    /// met the same; with tinyproxy, 13 of 30 downloads waited 30 s.)
    func testAHeadRelayedALineAtATimeIsReadWhole() async throws {
        let content = Self.content(200_000, seed: 7)
        let proxy = try SplitHeadProxy(content: content)
        defer { proxy.stop() }
        let url = http.url("/relayed")
        try await download(
            url, to: directory.file("relayed.bin"), expecting: content,
            options: ["proxy": .string(proxy.url), "connect_timeout": .double(5)])
        XCTAssertEqual(proxy.requestLines, ["GET \(url) HTTP/1.1"], "one request, answered the first time")
    }

    func testSOCKS5ResolvesHereAndSOCKS5hLetsTheProxyResolve() async throws {
        let socks = try MicroSocks()
        defer { socks.stop() }
        let content = Self.content(200_000, seed: 3)
        http.set("/s", Route(content: content))
        try await download(
            http.url("/s"), to: directory.file("socks5.bin"), expecting: content,
            options: ["proxy": .string(socks.url(resolvingNames: false))])
        let byName = http.url("/s").replacingOccurrences(of: "127.0.0.1", with: "localhost")
        try await download(
            byName, to: directory.file("socks5h.bin"), expecting: content,
            options: ["proxy": .string(socks.url(resolvingNames: true))])
        try await download(
            tls.url(.http1, "/s.bin"), to: directory.file("socks-tls.bin"),
            expecting: try {
                try tls.file("s.bin", content)
                return content
            }(), options: ["proxy": .string(socks.url(resolvingNames: true))])
        socks.stop()
        // Gone: the next download names the proxy it could not reach.
        let after = try await start(
            http.url("/s"), directory.file("gone.bin"), ["proxy": .string(socks.url(resolvingNames: true))])
        let (name, message) = try await failure(after)
        XCTAssertEqual(name, "org.example.Downloads.Error.ProxyError")
        XCTAssertTrue(message.contains("socks5h://127.0.0.1:\(socks.port)"), message)
    }

    func testADeadProxyAndARefusedTunnelFailWithProxyError() async throws {
        let content = Self.content(1000)
        http.set("/d", Route(content: content))
        try tls.file("d.bin", content)
        let dead = try FreePort.pick()
        let task = try await start(
            http.url("/d"), directory.file("dead.bin"), ["proxy": .string("http://127.0.0.1:\(dead)")])
        var (name, message) = try await failure(task)
        XCTAssertEqual(name, "org.example.Downloads.Error.ProxyError")
        XCTAssertTrue(message.contains("could not connect to the proxy http://127.0.0.1:\(dead)"), message)
        // Debian's default tinyproxy.conf: CONNECT to 443 and 563 only (squid's default is the
        // same): an https server on another port is refused its tunnel, an http URL is
        // forwarded and works.
        let strict = try TinyProxy(in: directory.path, connectPorts: [443, 563])
        defer { strict.stop() }
        let refused = try await start(
            tls.url(.http1, "/d.bin"), directory.file("refused.bin"), ["proxy": .string(strict.url)])
        (name, message) = try await failure(refused)
        XCTAssertEqual(name, "org.example.Downloads.Error.ProxyError")
        XCTAssertTrue(message.contains("refused the tunnel to localhost"), message)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("refused.bin")))
        try await download(
            http.url("/d"), to: directory.file("forwarded.bin"), expecting: content,
            options: ["proxy": .string(strict.url)])
        XCTAssertEqual(strict.forwardedRequests, [http.url("/d")])
    }

    func testAProxyOptionThatIsNotOneIsInvalidArgument() async throws {
        for text in ["https://proxy:443", "gopher://x:70", "http://proxy:0", "http://u:p@proxy:80/path"] {
            do {
                _ = try await start(http.url("/x"), directory.file("x"), ["proxy": .string(text)])
                XCTFail("\(text) was accepted")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", text)
            }
        }
        do {
            _ = try await start(http.url("/x"), directory.file("x"), ["proxy": .uint32(1)])
            XCTFail("a number was accepted")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
        }
    }

    func testTheDaemonsEnvironmentAppliesUnlessNoProxyOrTheTaskSaysOtherwise() async throws {
        let proxy = try TinyProxy(in: directory.path)
        defer { proxy.stop() }
        let content = Self.content(50_000, seed: 5)
        http.set("/e", Route(content: content))
        stopDaemon()
        daemonEnvironment = ["http_proxy": proxy.url, "HTTPS_PROXY": proxy.url]
        try await startDaemon()
        try await download(http.url("/e"), to: directory.file("env.bin"), expecting: content)
        XCTAssertEqual(proxy.forwardedRequests.count, 1, "http_proxy from the daemon's environment")
        try await download(
            http.url("/e"), to: directory.file("direct.bin"), expecting: content,
            options: ["proxy": .string("direct://")])
        XCTAssertEqual(proxy.forwardedRequests.count, 1, "direct:// goes straight to the server")
        try tls.file("e.bin", content)
        try await download(tls.url(.http2, "/e.bin"), to: directory.file("env-tls.bin"), expecting: content)
        XCTAssertEqual(proxy.connectRequests.last, "localhost:\(tls.port(.http2))", "HTTPS_PROXY for https URLs")

        stopDaemon()
        daemonEnvironment = ["http_proxy": proxy.url, "no_proxy": "localhost,127.0.0.0/8"]
        try await startDaemon()
        let before = proxy.forwardedRequests.count
        try await download(http.url("/e"), to: directory.file("bypass.bin"), expecting: content)
        XCTAssertEqual(proxy.forwardedRequests.count, before, "no_proxy: 127.0.0.0/8 goes direct")

        stopDaemon()
        daemonEnvironment = ["http_proxy": "http://user:hunter2@", "no_proxy": ""]
        try await startDaemon()
        try await download(http.url("/e"), to: directory.file("broken-env.bin"), expecting: content)
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertTrue(log.contains("http_proxy is ignored"), "a value that does not parse is reported: \(log)")
        XCTAssertFalse(log.contains("hunter2"))
    }

    func testPauseAndResumeThroughAProxyContinueWithIfRange() async throws {
        let proxy = try TinyProxy(in: directory.path, credentials: ("bob", "pa55"))
        defer { proxy.stop() }
        let content = Self.content(2_000_000, seed: 7)
        var slow = Route(content: content)
        slow.bytesPerSecond = 400_000
        http.set("/r", slow)
        let target = directory.file("resumed.bin")
        let task = try await start(
            http.url("/r"), target, ["proxy": .string("http://bob:pa55@127.0.0.1:\(proxy.port)")])
        try await waitBytes(task, atLeast: 300_000)
        let paused = try await call("Pause", [.objectPath(task)])
        let blob = try XCTUnwrap(paused.first?.bytesValue)
        XCTAssertFalse(
            String(decoding: blob, as: UTF8.self).contains("pa55"), "the proxy's password is sealed in the resume data")
        http.update("/r") { $0.bytesPerSecond = nil }
        let reply = try await call("ResumeWithData", [.bytes(blob), .vardict([:])])
        let resumed = try XCTUnwrap(reply.first?.objectPathValue)
        XCTAssertEqual(resumed, task, "the paused task carries on")
        try await assertFinished(resumed)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let requests = http.requests(for: "/r")
        XCTAssertEqual(requests.count, 2)
        XCTAssertNotNil(requests.last?.ifRange, "the resumed request carries If-Range")
        XCTAssertTrue(requests.last?.range?.hasPrefix("bytes=") == true && requests.last?.range != "bytes=0-")
        XCTAssertEqual(
            proxy.forwardedRequests.count, 2,
            "both requests went through the proxy, the resumed one with the sealed credentials")
    }

    // MARK: The caller's own proxy, resolved by the client

    static let ctl = PackageRoot.debugBinary("downloadsctl")

    func ctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(
            [Self.ctl, "--address", bus.address] + arguments, environment: bus.environment.merging(environment) { $1 },
            timeout: 60
        )
    }

    /// python-dbusmock standing in for xdg-desktop-portal's ProxyResolver on the test's bus (the
    /// callers' session bus), answering every Lookup with `answer`.
    func startPortal(answering answer: [String]) async throws -> ChildProcess {
        let portal = try ChildProcess(
            [
                "/usr/bin/python3", "-m", "dbusmock", "-l", directory.file("portal.log"),
                "org.freedesktop.portal.Desktop",
                "/org/freedesktop/portal/desktop", "org.freedesktop.portal.ProxyResolver",
            ],
            environment: bus.environment
        )
        addTeardownBlock { portal.stop() }
        try await until("the portal mock owns its name") {
            try await run(["busctl", "--address=\(bus.address)", "status", "org.freedesktop.portal.Desktop"]).status
                == 0
        }
        let list = answer.map { "'\($0)'" }.joined(separator: ", ")
        let added = try await run([
            "busctl", "--address=\(bus.address)", "call", "org.freedesktop.portal.Desktop",
            "/org/freedesktop/portal/desktop",
            "org.freedesktop.DBus.Mock", "AddMethod", "sssss", "org.freedesktop.portal.ProxyResolver", "Lookup", "s",
            "as",
            "ret = [\(list)]",
        ])
        XCTAssertEqual(added.status, 0, added.description)
        return portal
    }

    func testTheClientSendsThePortalsProxyElseTheEnvironmentsAndTheFlagsOverrideBoth() async throws {
        let office = try TinyProxy(in: directory.path)
        defer { office.stop() }
        let other = try TinyProxy(in: directory.path)
        defer { other.stop() }
        let content = Self.content(40_000, seed: 11)
        http.set("/c", Route(content: content))

        let portal = try await startPortal(answering: ["direct://"])
        var out = try await ctl(
            ["get", http.url("/c"), "-o", directory.file("direct.bin")], environment: ["http_proxy": other.url])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(
            office.forwardedRequests.count + other.forwardedRequests.count, 0,
            "the portal said direct: its answer stands over the environment, and nothing is sent")
        portal.stop()

        let resolving = try await startPortal(answering: ["socks4://127.0.0.1:1", "http://127.0.0.1:\(office.port)"])
        out = try await ctl(["get", http.url("/c"), "-o", directory.file("portal.bin")])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: directory.file("portal.bin")), Self.sha256(content))
        XCTAssertEqual(
            office.forwardedRequests, [http.url("/c")], "the first answer the service can use (SOCKS4 is not one)")
        let log = (try? String(contentsOfFile: directory.file("portal.log"), encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("Lookup \"\(http.url("/c"))\""), "the client asked the portal for this URL: \(log)")

        out = try await ctl(["get", "--no-proxy", http.url("/c"), "-o", directory.file("no-proxy.bin")])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(office.forwardedRequests.count, 1, "--no-proxy: straight to the server")
        out = try await ctl(["get", "--proxy", other.url, http.url("/c"), "-o", directory.file("flag.bin")])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(office.forwardedRequests.count, 1)
        XCTAssertEqual(other.forwardedRequests.count, 1, "--proxy wins over the portal")
        resolving.stop()
        try await until("the portal mock is gone") {
            try await run(["busctl", "--address=\(bus.address)", "status", "org.freedesktop.portal.Desktop"]).status
                != 0
        }

        // No portal: the caller's environment, with its no_proxy. (The daemon keeps the tunnel
        // of the last download through `other` open, so its log says what the client sent.)
        func sent(for name: String) throws -> String? {
            let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
            guard let line = log.split(separator: "\n").first(where: { $0.contains("→ \(directory.file(name))") })
            else { return "no task" }
            return line.range(of: " through ").map { String(line[$0.upperBound...]) }
        }
        out = try await ctl(
            ["get", http.url("/c"), "-o", directory.file("env.bin")], environment: ["http_proxy": other.url])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(try sent(for: "env.bin"), other.url, "http_proxy of the caller's environment")
        out = try await ctl(
            ["get", http.url("/c"), "-o", directory.file("env-bypass.bin")],
            environment: ["http_proxy": other.url, "no_proxy": "127.0.0.1"])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertNil(try sent(for: "env-bypass.bin"), "no_proxy of the caller's environment: no proxy sent")
        XCTAssertNil(try sent(for: "direct.bin"), "the portal's direct:// sends nothing")
        XCTAssertEqual(try sent(for: "portal.bin"), office.url)
        XCTAssertEqual(try sent(for: "no-proxy.bin"), "direct://")
        // A Metalink document and no URL: the proxy for its URL of the best priority is sent.
        let document = directory.file("c.meta4")
        try """
        <?xml version="1.0"?>
        <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="c.bin">
          <url priority="2">ftp://127.0.0.1/c</url>
          <url priority="1">\(http.url("/c"))</url>
        </file></metalink>
        """.write(toFile: document, atomically: true, encoding: .utf8)
        out = try await ctl(
            ["get", document, "-o", directory.file("meta.bin")], environment: ["http_proxy": other.url])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: directory.file("meta.bin")), Self.sha256(content))
        XCTAssertEqual(try sent(for: "meta.bin"), other.url, "the caller's proxy for the document's URL")
        let both = try await ctl(["get", "--proxy", other.url, "--no-proxy", http.url("/c"), "-o", directory.file("x")])
        XCTAssertNotEqual(both.status, 0)
        XCTAssertTrue(both.stderr.contains("exclude each other"), both.stderr)
    }

    /// A list of URLs asks the portal for each URL, but over one connection: the Starts go out 64
    /// at once, and each lookup opened its own connection to the session bus before (57 for a
    /// list of 200 without a portal). Counted by the bus's unique names, given out in order.
    func testAListOfURLsAsksThePortalOverOneConnection() async throws {
        let office = try TinyProxy(in: directory.path)
        defer { office.stop() }
        for index in 0..<40 { http.set("/l\(index)", Route(content: Self.content(2_000, seed: UInt32(index)))) }
        let list = directory.file("list.txt")
        try (0..<40).map { http.url("/l\($0)") }.joined(separator: "\n").write(
            toFile: list, atomically: true, encoding: .utf8)
        func serial() async throws -> Int {
            let probe = try await Connection.open(.address(bus.address))
            defer { probe.close() }
            return Int(probe.uniqueName.split(separator: ".").last ?? "") ?? 0
        }
        for portal in [false, true] {
            let into = directory.file(portal ? "with-portal" : "without")
            try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)
            let mock = portal ? try await startPortal(answering: ["http://127.0.0.1:\(office.port)"]) : nil
            let before = try await serial()
            let out = try await ctl(["get", "-i", list, "-o", into])
            let after = try await serial()
            mock?.stop()
            XCTAssertEqual(out.status, 0, out.description)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: into).count, 40)
            XCTAssertEqual(
                after - before - 1, 2, "portal \(portal): one connection for the service, one for the portal")
        }
        XCTAssertEqual(office.forwardedRequests.count, 40, "every URL through the portal's proxy")
        let log = (try? String(contentsOfFile: directory.file("portal.log"), encoding: .utf8)) ?? ""
        XCTAssertEqual(log.components(separatedBy: "Lookup \"").count - 1, 40, log)
    }
}
