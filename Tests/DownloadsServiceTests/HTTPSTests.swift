import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// HTTPS as users meet it: nginx with TLS and HTTP/2 on 127.0.0.1 and ::1, certificates from a
/// test CA the daemon trusts through the administrator's `--ca-file` (beside the system store).
/// Connections are counted in nginx's own log (`$connection`), protocols by `$server_protocol`.
/// The daemon offers HTTP/2 here (`--http2`); what it does by default is `HTTPVersionTests`'.
final class HTTPSTests: TLSDaemonTestCase {
    override var extraArguments: [String] { ["--ca-file", tls.certificates.caFile, "--http2"] }

    func testASingleDownloadUsesHTTP2WhenOfferedAndHTTP11WhenNot() async throws {
        let content = Self.content(3_000_000, seed: 3)
        try tls.file("one.bin", content)
        for site in [TLSTestServer.Site.http2, .http1] {
            try await download(tls.url(site, "/one.bin"), to: directory.file("one-\(site).bin"), expecting: content)
            let requests = tls.requests(for: "/one.bin", on: site)
            XCTAssertEqual(requests.map(\.httpVersion), [site == .http2 ? "HTTP/2.0" : "HTTP/1.1"])
        }
    }

    /// `GetMetrics` says which protocol answered each request, as nginx saw it.
    func testMetricsNameTheProtocolThatAnswered() async throws {
        let content = Self.content(200_000, seed: 4)
        try tls.file("m.bin", content)
        for site in [TLSTestServer.Site.http2, .http1] {
            // Two tasks to the same server, one after the other: the second goes on the
            // connection the first made (an h2 stream of it, or HTTP/1.1 keep-alive).
            var seen: [[String: DBusValue]] = []
            for name in ["m", "n"] {
                let task = try await download(
                    tls.url(site, "/m.bin"), to: directory.file("\(name)-\(site).bin"), expecting: content)
                let list = try await getMetrics(task).transactions
                XCTAssertEqual(list.map { $0["protocol"]?.stringValue }, [site == .http2 ? "h2" : "http/1.1"])
                seen += list
            }
            let (first, second) = (seen[0], seen[1])
            let requests = tls.requests(for: "/m.bin", on: site)
            for transaction in seen {
                // As nginx names it (Debian 12's nginx offers TLSv1.2 unless told otherwise).
                XCTAssertEqual(
                    transaction["tls_version"]?.stringValue, requests.first?.tlsVersion, "\(site): \(transaction)")
                XCTAssertTrue(["TLSv1.2", "TLSv1.3"].contains(requests.first?.tlsVersion ?? ""))
                XCTAssertEqual(transaction["remote_address"]?.stringValue, "127.0.0.1", "\(site)")
                XCTAssertNil(transaction["connect_end"], "\(site): under TLS, when TCP was up is not seen")
                XCTAssertNil(transaction["tls_start"], "\(site)")
            }
            XCTAssertEqual(first["reused_connection"]?.boolValue, false, "\(site): \(first)")
            let ready = try XCTUnwrap(first["tls_end"]?.uint64Value, "\(site): \(first)")
            XCTAssertLessThanOrEqual(first["fetch_start"]?.uint64Value ?? .max, ready)
            XCTAssertLessThanOrEqual(ready, first["request_start"]?.uint64Value ?? 0)
            XCTAssertEqual(second["reused_connection"]?.boolValue, true, "\(site): \(second)")
            XCTAssertNil(second["tls_end"], "\(site): no handshake for it")
            XCTAssertEqual(
                requests.map(\.httpVersion), Array(repeating: site == .http2 ? "HTTP/2.0" : "HTTP/1.1", count: 2))
            XCTAssertEqual(Set(requests.map(\.connection)).count, 1, "\(site): nginx saw one connection")
        }
    }

    func testConnectionsFourOpensFourTCPConnectionsOverHTTPS() async throws {
        // 16 MiB at 2 MB/s per request: four connections stay busy long enough to be seen.
        let content = Self.content(16 << 20, seed: 4)
        try tls.file("big.bin", content)
        for site in [TLSTestServer.Site.http2, .http1] {
            try await download(
                tls.url(site, "/limited/big.bin"), to: directory.file("big-\(site).bin"), expecting: content,
                options: ["connections": .uint32(4)], seconds: 90
            )
            // nginx logs a request when it ends: the first one (cut where its range ended) may come last.
            try await until("nginx logged the first request") {
                tls.requests(for: "/limited/big.bin", on: site).contains { $0.range == nil }
            }
            let requests = tls.requests(for: "/limited/big.bin", on: site)
            XCTAssertEqual(
                Set(requests.map(\.connection)).count, 4,
                "\(site): \(tls.requests.map { "\($0.connection) \($0.path) \($0.range ?? "-")" })")
            XCTAssertTrue(requests.allSatisfy { $0.httpVersion == "HTTP/1.1" }, "\(requests.map(\.httpVersion))")
            // A connection closed where its range ended stops receiving: little is sent twice.
            let sent = requests.map(\.bodyBytes).reduce(0, +)
            XCTAssertLessThan(
                sent - content.count, 1 << 20, "\(site): \(requests.map { "\($0.range ?? "-") \($0.bodyBytes)" })")
        }
    }

    func testPausedAndResumedOverHTTP2AndHTTP11() async throws {
        let content = Self.content(4_000_000, seed: 5)
        try tls.file("pause.bin", content)
        for site in [TLSTestServer.Site.http2, .http1] {
            let target = directory.file("pause-\(site).bin")
            let path = try await start(tls.url(site, "/limited/pause.bin"), target)
            try await waitBytes(path, atLeast: 600_000)
            let reply = try await call("Pause", [.objectPath(path)])
            XCTAssertFalse((reply.first?.bytesValue ?? []).isEmpty, "resume data")
            let written = try await property(path, "BytesWritten")?.int64Value
            let kept = try XCTUnwrap(written)
            _ = try await call("Resume", [.objectPath(path)])
            try await assertFinished(path, seconds: 60)
            XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
            let ranges = tls.requests(for: "/limited/pause.bin", on: site).compactMap(\.range)
            XCTAssertEqual(
                ranges.last, "bytes=\(kept)-", "\(site): the resumed request continues where the pause left it")
        }
    }

    func testKilledMidDownloadOverHTTPSResumesWhereItWasDurable() async throws {
        let content = Self.content(7_000_000, seed: 6)
        try tls.file("crash.bin", content)
        for site in [TLSTestServer.Site.http2, .http1] {
            let target = directory.file("crash-\(site).bin")
            let path = try await start(tls.url(site, "/limited/crash.bin"), target)
            // Over a second of transfer at 2 MB/s: a checkpoint (every second) has been recorded.
            try await waitBytes(path, atLeast: 3_000_000)
            killDaemon()
            try await startDaemon()
            try await assertFinished(path)
            XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
            let requests = tls.requests(for: "/limited/crash.bin", on: site)
            let resumedAt = requests.last?.range.flatMap { Int($0.dropFirst("bytes=".count).dropLast()) } ?? 0
            XCTAssertGreaterThan(resumedAt, 0, "\(site): \(requests.map { $0.range ?? "-" })")
        }
    }

    func testTLSFailuresSayWhichCheckFailedAndLeaveNoFile() async throws {
        try tls.file("t.bin", Self.content(1000))
        let closing = try HandshakeClosingServer()
        defer { closing.stop() }
        let cases: [(String, String)] = [
            (tls.url(.untrusted, "/t.bin"), "is issued by “CN=Untrusted Test CA”, which this system does not trust"),
            (tls.url(.selfSigned, "/t.bin"), "is self-signed (“CN=localhost”), which this system does not trust"),
            (tls.url(.expired, "/t.bin"), "expired on 2020-01-02"),
            (tls.url(.otherHost, "/t.bin"), "not issued for the host name localhost"),
            ("https://127.0.0.1:\(closing.port)/t.bin", "closed the connection"),
        ]
        for (n, (url, expected)) in cases.enumerated() {
            let target = directory.file("fail-\(n)/t.bin")
            try FileManager.default.createDirectory(
                atPath: directory.file("fail-\(n)"), withIntermediateDirectories: true)
            let path = try await start(url, target)
            let state = try await waitState(path, ["finished", "failed"])
            XCTAssertEqual(state, "failed")
            let name = try await property(path, "Error")?.stringValue
            XCTAssertEqual(name, "org.example.Downloads.Error.TLSError", url)
            let message = try await property(path, "ErrorMessage")?.stringValue ?? ""
            XCTAssertTrue(message.contains(expected), "\(url): \(message)")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.file("fail-\(n)")), [], url)
        }
        // No D-Bus option turns verification off.
        do {
            _ = try await start(
                tls.url(.untrusted, "/t.bin"), directory.file("insecure.bin"), ["insecure": .boolean(true)])
            XCTFail("an option to skip verification was accepted")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
        }
    }

    func testARedirectFromOneHTTPSHostToAnother() async throws {
        let content = Self.content(500_000, seed: 7)
        try tls.file("moved.bin", content)
        // https://127.0.0.1:<http2> → https://localhost:<http1>: another host and port.
        try await download(
            tls.url(.http2, "/redirect/moved.bin", host: "127.0.0.1"), to: directory.file("moved.bin"),
            expecting: content)
        XCTAssertEqual(tls.requests(for: "/redirect/moved.bin", on: .http2).map(\.status), [302])
        XCTAssertEqual(tls.requests(for: "/moved.bin", on: .http1).map(\.status), [200])
    }

    func testIPv6LoopbackOverHTTPS() async throws {
        let content = Self.content(200_000, seed: 8)
        try tls.file("six.bin", content)
        let task = try await download(tls.url(.ipv6, "/six.bin"), to: directory.file("six.bin"), expecting: content)
        let list = try await getMetrics(task).transactions
        XCTAssertEqual(list.last?["remote_address"]?.stringValue, "::1", "\(list)")
    }

    func testFiveHundredSmallFilesShareOneHTTP2Connection() async throws {
        let count = 500
        var contents: [[UInt8]] = []
        for n in 0..<count {
            let content = Self.content(2048 + n, seed: UInt32(1000 + n))
            contents.append(content)
            try tls.file("small-\(n).bin", content)
        }
        try FileManager.default.createDirectory(atPath: directory.file("small"), withIntermediateDirectories: true)
        var paths: [ObjectPath] = []
        for n in 0..<count {
            paths.append(
                try await start(
                    tls.url(.http2, "/small-\(n).bin"), directory.file("small/\(n).bin"), ["session": .string("many")]))
        }
        for path in paths {
            let state = try await waitState(path, ["finished", "failed"], seconds: 120)
            XCTAssertEqual(state, "finished")
        }
        for n in 0..<count {
            XCTAssertEqual(sha256(ofFile: directory.file("small/\(n).bin")), Self.sha256(contents[n]), "file \(n)")
        }
        let requests = tls.requests.filter { $0.path.hasPrefix("/small-") }
        XCTAssertEqual(requests.count, count)
        XCTAssertTrue(requests.allSatisfy { $0.httpVersion == "HTTP/2.0" })
        XCTAssertEqual(Set(requests.map(\.connection)).count, 1, "connections: \(Set(requests.map(\.connection)))")
        // Each task's metrics agree: one request opened the connection, every other was a
        // stream of it.
        var reused: [Bool?] = []
        for path in paths {
            reused += try await getMetrics(path).transactions.map { $0["reused_connection"]?.boolValue }
        }
        XCTAssertEqual(reused.count, count)
        XCTAssertEqual(reused.filter { $0 == false }.count, 1, "the one that made it")
        XCTAssertEqual(reused.filter { $0 == true }.count, count - 1, "streams of it")
    }
}
