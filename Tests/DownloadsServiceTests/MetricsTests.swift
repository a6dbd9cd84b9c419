import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `GetMetrics`: where a task's time went, measured, through the bus: a plain download, a
/// redirect, a retry and a mirrored download, each phase in order and within the task's own
/// times, the bytes each source served adding up to the file, kept through a restart; read by
/// busctl and shown by `downloadsctl status -v`.
final class MetricsTests: DaemonTestCase {
    struct Metrics {
        var task: [String: DBusValue]
        var transactions: [[String: DBusValue]]

        func time(_ name: String) -> UInt64? { task[name]?.uint64Value }
        func count(_ name: String) -> UInt32? { task[name]?.uint32Value }
        var bySource: [String: UInt64] {
            guard case .dictionary(_, _, let entries)? = task["bytes_by_source"] else { return [:] }
            return Dictionary(
                entries.compactMap { entry in entry.key.stringValue.map { ($0, entry.value.uint64Value ?? 0) } },
                uniquingKeysWith: +)
        }
    }

    func metrics(_ task: ObjectPath) async throws -> Metrics {
        let (summary, transactions) = try await getMetrics(task)
        return Metrics(task: summary, transactions: transactions)
    }

    /// Every phase a request has is in order, within the task's start and end.
    func assertInOrder(_ metrics: Metrics, file: StaticString = #filePath, line: UInt = #line) {
        let start = metrics.time("started_at") ?? 0
        let end = metrics.time("ended_at") ?? .max
        XCTAssertLessThanOrEqual(
            metrics.time("queued_at") ?? 0, start, "queued before it started", file: file, line: line)
        if let first = metrics.time("first_byte_at") {
            XCTAssertTrue(start <= first && first <= end, "first byte within the run", file: file, line: line)
        }
        var previousEnd: UInt64 = 0
        for transaction in metrics.transactions {
            let phases = [
                "fetch_start", "lookup_start", "lookup_end", "connect_start", "connect_end", "tls_end",
                "request_start", "response_start", "response_end",
            ]
            .compactMap { transaction[$0]?.uint64Value }
            XCTAssertEqual(phases, phases.sorted(), "phases in order: \(transaction)", file: file, line: line)
            XCTAssertGreaterThanOrEqual(phases.first ?? 0, start, "after the task started", file: file, line: line)
            XCTAssertLessThanOrEqual(phases.last ?? .max, end, "response_end ≤ ended_at", file: file, line: line)
            XCTAssertGreaterThanOrEqual(phases.first ?? 0, previousEnd, "one after the other", file: file, line: line)
            previousEnd = transaction["response_end"]?.uint64Value ?? previousEnd
            // Inside AsyncHTTPClient's pool or NIOSSL: when TCP was up under TLS.
            for unseen in ["tls_start"] {
                XCTAssertNil(
                    transaction[unseen], "\(unseen) is not measured: absent, not guessed", file: file, line: line)
            }
        }
    }

    func testAPlainDownloadsTimesAndBytes() async throws {
        let content = Self.content(300_000, seed: 71)
        http.set("/f.bin", Route(content: content))
        let task = try await start(http.url("/f.bin"), directory.file("f.bin"))
        try await waitState(task, ["finished"])
        let found = try await metrics(task)
        assertInOrder(found)
        XCTAssertNotNil(found.time("queued_at"))
        XCTAssertNotNil(found.time("first_byte_at"))
        XCTAssertNotNil(found.time("ended_at"))
        XCTAssertEqual(found.count("attempts"), 1)
        XCTAssertEqual(found.count("redirects"), 0)
        XCTAssertEqual(found.count("restarts"), 0)
        XCTAssertEqual(found.bySource, [http.url("/f.bin"): UInt64(content.count)])
        XCTAssertEqual(found.transactions.count, 1)
        let only = try XCTUnwrap(found.transactions.first)
        XCTAssertEqual(only["status"]?.uint32Value, 200)
        XCTAssertEqual(only["protocol"]?.stringValue, "http/1.1")
        XCTAssertEqual(only["url"]?.stringValue, http.url("/f.bin"))
        XCTAssertEqual(only["source"]?.stringValue, "url")
        XCTAssertEqual(only["range"]?.stringValue, "")
        XCTAssertEqual(only["bytes_received"]?.uint64Value, UInt64(content.count))
        XCTAssertNotNil(only["request_start"])
        XCTAssertNotNil(only["response_start"])
        XCTAssertNil(only["lookup_start"], "AsyncHTTPClient looked the name up: not seen here")
        // Its connection: new, made for it (connected after the fetch began, before the head
        // went), to the server's address, plain.
        XCTAssertEqual(only["reused_connection"]?.boolValue, false)
        XCTAssertEqual(only["remote_address"]?.stringValue, "127.0.0.1")
        let connected = try XCTUnwrap(only["connect_end"]?.uint64Value, "\(only)")
        XCTAssertLessThanOrEqual(only["fetch_start"]?.uint64Value ?? .max, connected)
        XCTAssertLessThanOrEqual(connected, only["request_start"]?.uint64Value ?? 0)
        XCTAssertNil(only["connect_start"], "inside AsyncHTTPClient's pool: not seen")
        XCTAssertNil(only["tls_end"])
        XCTAssertNil(only["tls_version"])

        // The same after a restart: kept in the store.
        stopDaemon()
        try await startDaemon()
        let again = try await metrics(task)
        XCTAssertEqual(again.task, found.task)
        XCTAssertEqual(again.transactions, found.transactions)

        // busctl reads it; downloadsctl shows it as a waterfall.
        let busctl = try await run([
            "busctl", "--address=\(bus.address)", "call", "org.example.Downloads", task.rawValue,
            "org.example.Downloads.Task", "GetMetrics",
        ])
        XCTAssertEqual(busctl.status, 0, busctl.description)
        XCTAssertTrue(busctl.stdout.hasPrefix("a{sv}aa{sv} "), busctl.stdout)
        let shown = try await run([
            PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "status", "-v", task.rawValue,
        ])
        XCTAssertEqual(shown.status, 0, shown.description)
        XCTAssertTrue(shown.stdout.contains("attempts 1, redirects 0, restarts 0"), shown.stdout)
        XCTAssertTrue(
            shown.stdout.contains(
                "request:     #1 200 http/1.1 \(http.url("/f.bin")) at 127.0.0.1, new connection"),
            shown.stdout)
        XCTAssertTrue(shown.stdout.contains("connected +"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("first byte +"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("293 KiB received"), shown.stdout)
    }

    func testARedirectAndARetryAreRequestsOfTheirOwn() async throws {
        let content = Self.content(100_000, seed: 72)
        var moved = Route(content: [])
        moved.redirect = (status: 302, location: http.url("/new.bin"))
        http.set("/old.bin", moved)
        var flaky = Route(content: content)
        flaky.failFirst = (count: 1, status: 503, retryAfter: "0")
        http.set("/new.bin", flaky)
        let task = try await start(http.url("/old.bin"), directory.file("new.bin"))
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("new.bin")), Self.sha256(content))
        let found = try await metrics(task)
        assertInOrder(found)
        let statuses = found.transactions.map { $0["status"]?.uint32Value ?? 0 }
        // The 503 is retried (from the task's URL or where it led: either way a request each).
        XCTAssertEqual(statuses.filter { $0 == 503 }.count, 1, "\(statuses)")
        XCTAssertEqual(statuses.last, 200, "\(statuses)")
        XCTAssertEqual(statuses.first, 302, "\(statuses)")
        XCTAssertEqual(found.count("attempts"), UInt32(found.transactions.count))
        XCTAssertEqual(found.count("redirects"), UInt32(statuses.filter { $0 == 302 }.count))
        XCTAssertGreaterThanOrEqual(found.count("redirects") ?? 0, 1)
        XCTAssertEqual(found.transactions.last?["url"]?.stringValue, http.url("/new.bin"))
        XCTAssertEqual(found.bySource.values.reduce(0, +), UInt64(content.count), "\(found.bySource)")
    }

    func testAMirroredDownloadSaysWhatEachSourceServed() async throws {
        let content = Self.content(6_000_000, seed: 73)
        for path in ["/a.iso", "/b.iso"] {
            var route = Route(content: content)
            route.bytesPerSecond = 4_000_000
            http.set(path, route)
        }
        let task = try await start(
            http.url("/a.iso"), directory.file("m.iso"),
            ["mirrors": .strings([http.url("/b.iso")]), "connections": .uint32(4)])
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("m.iso")), Self.sha256(content))
        let found = try await metrics(task)
        XCTAssertEqual(found.bySource.values.reduce(0, +), UInt64(content.count), "\(found.bySource)")
        XCTAssertEqual(Set(found.bySource.keys), [http.url("/a.iso"), http.url("/b.iso")], "both served")
        XCTAssertTrue(found.transactions.contains { $0["source"]?.stringValue == "mirror" })
        XCTAssertTrue(found.transactions.contains { ($0["range"]?.stringValue ?? "").hasPrefix("bytes=") })
        XCTAssertEqual(found.count("attempts"), UInt32(found.transactions.count))
    }

    func testASecondTaskToTheServerGoesOnTheConnectionTheFirstLeft() async throws {
        let content = Self.content(50_000, seed: 74)
        http.set("/one.bin", Route(content: content))
        http.set("/two.bin", Route(content: content))
        // A caller's header of the tag's name is refused, as every header the service sets is.
        let forged = ["headers": DBusValue.stringDict(["X-Org-Example-Downloads-Transaction": "1"])]
        do {
            _ = try await start(http.url("/one.bin"), directory.file("forged.bin"), forged)
            XCTFail("the service's own tag header is not a caller's")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
        }
        var found: [Metrics] = []
        for name in ["one", "two"] {
            let task = try await start(http.url("/\(name).bin"), directory.file("\(name).bin"))
            try await waitState(task, ["finished"])
            XCTAssertEqual(sha256(ofFile: directory.file("\(name).bin")), Self.sha256(content))
            found.append(try await metrics(task))
        }
        let (first, second) = (try XCTUnwrap(found[0].transactions.first), try XCTUnwrap(found[1].transactions.first))
        XCTAssertEqual(first["reused_connection"]?.boolValue, false, "\(first)")
        XCTAssertEqual(second["reused_connection"]?.boolValue, true, "\(second)")
        XCTAssertNotNil(first["connect_end"])
        XCTAssertNil(second["connect_end"], "a reused connection was not made for it")
        XCTAssertEqual(second["remote_address"]?.stringValue, "127.0.0.1")
        // The server's own count agrees: one connection carried both.
        let connections = http.requests.filter { ["/one.bin", "/two.bin"].contains($0.path) }.map(\.connection)
        XCTAssertEqual(connections.count, 2)
        XCTAssertEqual(Set(connections).count, 1, "\(connections)")
        // The tag that tells a request its connection never leaves the service.
        XCTAssertTrue(
            http.requests.allSatisfy { $0.userHeaders["x-org-example-downloads-transaction"] == nil },
            "\(http.requests.map(\.userHeaders))")
    }

    func testAnHTTP10ServerClosesEachConnection() async throws {
        let old = try HTTP10Server(in: directory.path)
        defer { old.stop() }
        for name in ["a", "b"] {
            let task = try await start(
                old.url("/login/\(name)"), directory.file("old-\(name).bin"),
                ["headers": .stringDict(["Authorization": "Basic aGFsOjkwMDA="])])
            try await waitState(task, ["finished"])
            let found = try await metrics(task)
            assertInOrder(found)
            let last = try XCTUnwrap(found.transactions.last)
            XCTAssertEqual(last["protocol"]?.stringValue, "http/1.0")
            XCTAssertEqual(last["status"]?.uint32Value, 200)
            XCTAssertEqual(last["bytes_received"]?.uint64Value, 1 << 20)
            XCTAssertEqual(found.bySource.values.reduce(0, +), 1 << 20)
            // It closes after each answer: every request has a connection of its own.
            XCTAssertTrue(
                found.transactions.allSatisfy { $0["reused_connection"]?.boolValue == false }, "\(found.transactions)")
            XCTAssertTrue(found.transactions.allSatisfy { $0["connect_end"] != nil }, "\(found.transactions)")
        }
    }

    func testAQueuedTaskHasNothingYetAndAStrangersTaskDoesNotExist() async throws {
        let task = try await start(
            http.url("/later"), directory.file("later"),
            ["earliest_begin": .uint64(UInt64(Date().timeIntervalSince1970) + 3600)])
        let found = try await metrics(task)
        XCTAssertEqual(found.transactions.count, 0)
        XCTAssertNil(found.time("started_at"), "not started")
        XCTAssertNotNil(found.time("queued_at"))
        XCTAssertEqual(found.count("attempts"), 0)
        do {
            _ = try await metrics(try ObjectPath("/org/example/Downloads/tasks/99999"))
            XCTFail("a missing task answered")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.NotFound")
        }
    }
}

extension MetricsTests {
    /// The fourth trust round's fifth finding: a server chooses the URLs a task's metrics keep.
    /// Ten redirects with 70 KB `Location`s each: every URL kept is cut to `maxURLBytes` and says
    /// its length, so twenty such tasks leave the database a few hundred KiB, not 15 MB.
    func testRedirectURLsAServerChoseAreKeptCutAndMarked() async throws {
        let content = Self.content(2000, seed: 74)
        let pad = String(repeating: "a", count: 70_000)
        for hop in 0..<10 {
            var route = Route(content: [])
            route.redirect = (status: 302, location: http.url("/hop\(hop + 1)") + "?pad=\(hop)" + pad)
            http.set("/hop\(hop)", route)
        }
        http.set("/hop10", Route(content: content))
        var tasks: [ObjectPath] = []
        for index in 0..<20 {
            tasks.append(try await start(http.url("/hop0"), directory.file("hop\(index).bin")))
        }
        for task in tasks { try await waitState(task, ["finished"]) }
        XCTAssertEqual(sha256(ofFile: directory.file("hop0.bin")), Self.sha256(content))
        let found = try await metrics(tasks[0])
        XCTAssertEqual(found.count("redirects"), 10)
        let urls = found.transactions.compactMap { $0["url"]?.stringValue }
        XCTAssertEqual(urls.count, 11)
        for url in urls.dropFirst() {
            XCTAssertLessThanOrEqual(url.utf8.count, 512, String(url.prefix(80)))
            XCTAssertTrue(url.hasSuffix("bytes]"), String(url.suffix(40)))
            XCTAssertTrue(url.contains("…[700"), String(url.suffix(40)))
        }
        XCTAssertEqual(urls.first, http.url("/hop0"), "a short URL is kept whole")
        // What the database holds for them (its file and WAL): the tasks' final URLs (1.4 MB), not
        // the 14 MB of whole URLs the metrics kept before.
        var stored = 0
        var sizes: [String: Int] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: stateDirectory)) ?? [] {
            let attributes = try? FileManager.default.attributesOfItem(atPath: stateDirectory + "/" + name)
            sizes[name] = (attributes?[.size] as? Int) ?? 0
            if name.hasPrefix("downloads.sqlite") { stored += sizes[name] ?? 0 }
        }
        XCTAssertLessThan(stored, 7_000_000, "the database holds \(stored) bytes: \(sizes)")
    }
}
