import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// downloads-monitor (GIO's GDBus, not libdbus) following the real daemon's tasks.
final class DownloadsMonitorTests: DaemonTestCase {
    static let monitor = PackageRoot.debugBinary("downloads-monitor")

    func testReportsADownloadThroughToItsEnd() async throws {
        let child = try ChildProcess([Self.monitor, "--address", bus.address])
        let ready = await Task.detached { String(decoding: child.stderr.availableData, as: UTF8.self) }.value
        XCTAssertTrue(ready.contains("watching org.example.Downloads"), ready)
        var route = Route(content: Self.content(2_500_000))
        route.bytesPerSecond = 1_000_000
        http.set("/m.bin", route)
        var failing = Route(content: [])
        failing.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/gone", failing)
        let path = try await start(http.url("/m.bin"), directory.file("m.bin"))
        try await waitState(path, ["finished"])
        let gone = try await start(http.url("/gone"), directory.file("gone"))
        try await waitState(gone, ["failed"])
        // Read as the monitor writes, until its last line is there, then stop it.
        let output = OutputCollector(child.stdout)
        try await until("the monitor reports task 2 failed") { output.text.contains("task 2 failed") }
        child.signal(SIGTERM)
        XCTAssertEqual(child.wait(), 0)
        let lines = await output.finish().split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "task 1 started: \(http.url("/m.bin")) -> \(directory.file("m.bin"))", "\(lines)")
        let progress = lines.filter { $0.hasPrefix("task 1 progress: ") }
        XCTAssertGreaterThanOrEqual(progress.count, 1, "\(lines)")
        XCTAssertLessThanOrEqual(progress.count, 4, "at most one a second: \(lines)")
        XCTAssertTrue(lines.contains("task 1 finished: \(directory.file("m.bin"))"), "\(lines)")
        XCTAssertEqual(
            lines.last, "task 2 failed: the server answered 404 Not Found (org.example.Downloads.Error.HTTPError)",
            "\(lines)")
    }
    func testReportsAGroupsProgressAndEnd() async throws {
        let child = try ChildProcess([Self.monitor, "--address", bus.address])
        let ready = await Task.detached { String(decoding: child.stderr.availableData, as: UTF8.self) }.value
        XCTAssertTrue(ready.contains("watching org.example.Downloads"), ready)
        http.set("/g1", Route(content: Self.content(30_000, seed: 1)))
        http.set("/g2", Route(content: Self.content(40_000, seed: 2)))
        let reply = try await call(
            "StartGroup",
            [
                .array(
                    element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                    [
                        .structure([.string(http.url("/g1")), .string(directory.file("g1")), .vardict([:])]),
                        .structure([.string(http.url("/g2")), .string(directory.file("g2")), .vardict([:])]),
                    ]),
                .vardict([:]),
            ])
        XCTAssertEqual(reply.first?.objectPathValue, "/org/example/Downloads/groups/1")
        let output = OutputCollector(child.stdout)
        try await until("the monitor reports group 1 finished") { output.text.contains("group 1 finished") }
        child.signal(SIGTERM)
        XCTAssertEqual(child.wait(), 0)
        let lines = await output.finish().split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("group 1 progress: 2 of 2 files, 70000 of 70000 bytes"), "\(lines)")
        XCTAssertEqual(lines.last, "group 1 finished", "\(lines)")
        XCTAssertFalse(lines.contains { $0.hasPrefix("task ") }, "a group's files send no task signals: \(lines)")
    }

    func testReportsAnUploadFromItsFileToItsURL() async throws {
        let child = try ChildProcess([Self.monitor, "--address", bus.address])
        let ready = await Task.detached { String(decoding: child.stderr.availableData, as: UTF8.self) }.value
        XCTAssertTrue(ready.contains("watching org.example.Downloads"), ready)
        http.set("/inbox", Route.receiving())
        let file = directory.file("log.txt")
        try Data(Self.content(1_500_000, seed: 3)).write(to: URL(fileURLWithPath: file))
        let reply = try await call(
            "Upload",
            [.string(http.url("/inbox")), .string(file), .vardict(["max_bytes_per_second": .uint64(1_000_000)])])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitState(task, ["finished"])
        let output = OutputCollector(child.stdout)
        try await until("the monitor reports upload 1 finished") { output.text.contains("upload 1 finished") }
        child.signal(SIGTERM)
        XCTAssertEqual(child.wait(), 0)
        let lines = await output.finish().split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "upload 1 started: \(file) -> \(http.url("/inbox"))", "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("upload 1 progress: ") && $0.hasSuffix(" sent") }, "\(lines)")
        XCTAssertEqual(lines.last, "upload 1 finished", "\(lines)")
    }
}

extension DownloadsMonitorTests {
    /// The fourth trust round's first finding, for the client that is GDBus's: another connection's
    /// `Finished` in the service's interface, broadcast and sent to every connection, is not the
    /// service's (GDBus follows the name's owner, as our own clients now do).
    func testAForgedSignalIsNotTakenForTheServices() async throws {
        let child = try ChildProcess([Self.monitor, "--address", bus.address])
        let ready = await Task.detached { String(decoding: child.stderr.availableData, as: UTF8.self) }.value
        XCTAssertTrue(ready.contains("watching org.example.Downloads"), ready)
        try await forgeManagerSignal(
            "Finished", [.objectPath("/org/example/Downloads/tasks/1"), .string("/etc/shadow")])
        http.set("/real.bin", Route(content: Self.content(20_000)))
        let path = try await start(http.url("/real.bin"), directory.file("real.bin"))
        try await waitState(path, ["finished"])
        let output = OutputCollector(child.stdout)
        try await until("the monitor reports task 1 finished") { output.text.contains("task 1 finished") }
        child.signal(SIGTERM)
        XCTAssertEqual(child.wait(), 0)
        let text = await output.finish()
        XCTAssertFalse(text.contains("shadow"), text)
        XCTAssertTrue(text.contains("task 1 finished: \(directory.file("real.bin"))"), text)
    }
}
