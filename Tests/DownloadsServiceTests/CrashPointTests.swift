import CrashPoints
import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The daemon killed at each named durable boundary (`CrashPoint`, armed by
/// `DOWNLOADSD_CRASH_AT`), then started again on the same state and left to finish: every task is
/// still known and finishes, every published file has the source's SHA-256 and sits under its own
/// name (none half-published, no partial file left), the completion call is made (at most once
/// more than asked: the documented duplicate), and what was fetched twice is at most a checkpoint
/// per connection. The file helper's point is in `FileHelperTests`.
final class CrashPointTests: DaemonTestCase {
    /// What one run downloads: a one-stream file, a segmented one and two small ones (one into a
    /// directory, named from the URL), all in the session "bg", whose completion handler is the
    /// test's own object.
    struct Download {
        let route: String
        let content: [UInt8]
        let destination: String
        let published: String
        let options: [String: DBusValue]
        let connections: Int
        let rate: Int
    }

    private func downloads() throws -> [Download] {
        let inbox = directory.file("inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let bg: [String: DBusValue] = ["session": .string("bg")]
        return [
            Download(
                route: "/one", content: Self.content(4_000_000, seed: 1), destination: directory.file("one.bin"),
                published: directory.file("one.bin"), options: bg, connections: 1, rate: 1_000_000),
            Download(
                route: "/seg", content: Self.content(8 << 20, seed: 2), destination: directory.file("seg.bin"),
                published: directory.file("seg.bin"), options: bg.merging(["connections": .uint32(4)]) { $1 },
                connections: 4, rate: 700_000),
            Download(
                route: "/small", content: Self.content(20_000, seed: 3), destination: directory.file("small.bin"),
                published: directory.file("small.bin"), options: bg, connections: 1, rate: 0),
            Download(
                route: "/named.txt", content: Self.content(30_000, seed: 4), destination: inbox,
                published: inbox + "/named.txt", options: bg, connections: 1, rate: 0),
        ]
    }

    /// Kills the daemon at the `arrival`-th time it reaches `point` during the downloads, starts it
    /// again without the point armed, and checks what the type's comment promises.
    private func crash(at point: CrashPoint, arrival: Int = 1) async throws {
        let app = try CompletionHandlerTests.App(connection: try await Connection.open(.address(bus.address)))
        defer { app.connection.close() }
        try await app.register("bg") { try await self.call($0, $1) }
        let downloads = try downloads()
        for download in downloads {
            var route = Route(content: download.content)
            if download.rate > 0 { route.bytesPerSecond = download.rate }
            http.set(download.route, route)
        }
        stopDaemon()
        daemonEnvironment = [CrashPoint.environmentVariable: "\(point.rawValue):\(arrival)"]
        try await startDaemon()
        let crashedLog = daemonLog
        var paths: [ObjectPath] = []
        for download in downloads {
            paths.append(try await start(http.url(download.route), download.destination, download.options))
        }
        try await waitForCrash(at: point, log: crashedLog)
        daemonEnvironment = [:]
        try await startDaemon()
        try await expectEverythingFinished(paths, downloads, crashes: 1)
        try await until("the completion call", seconds: 30) { app.calls.withLockedValue { $0.contains("bg") } }
        let calls = app.calls.withLockedValue { $0 }
        XCTAssertTrue((1...2).contains(calls.count), "completion calls: \(calls)")
    }

    /// Waits for the daemon to kill itself at `point` (its log says so) and reaps it.
    private func waitForCrash(at point: CrashPoint, log: String) async throws {
        try await until("the daemon to reach \(point.rawValue)", seconds: 60, log: log) {
            self.daemon?.hasExited == true
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertTrue(
            text.contains("crash point \(point.rawValue) reached"), "the daemon died elsewhere:\n\(text.suffix(3000))")
        XCTAssertEqual(daemon?.wait(), 128 + SIGKILL)
        daemon = nil
    }

    private func expectEverythingFinished(_ paths: [ObjectPath], _ downloads: [Download], crashes: Int) async throws {
        for (path, download) in zip(paths, downloads) {
            let state = try await waitState(path, ["finished", "failed", "cancelled"], seconds: 120)
            let message = try await property(path, "ErrorMessage")?.stringValue ?? ""
            XCTAssertEqual(state, "finished", "\(download.route): \(message)")
            XCTAssertEqual(sha256(ofFile: download.published), Self.sha256(download.content), download.route)
            // A crash costs at most a checkpoint (a second's worth, on each connection) and what
            // was in flight: allow two seconds' worth per connection.
            let served = http.requests(for: download.route).map(\.bodyBytesSent).reduce(0, +)
            let allowed =
                download.rate > 0
                ? crashes * download.connections * 2 * download.rate : crashes * download.content.count
            XCTAssertLessThanOrEqual(
                served - download.content.count, allowed, "\(download.route) fetched too much again")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertFalse(names.contains { $0.hasSuffix(".part") }, "\(names)")
        XCTAssertEqual(
            names.filter { $0.hasSuffix(".bin") }, ["one.bin", "seg.bin", "small.bin"], "none published twice")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.file("inbox")), ["named.txt"])
    }

    func testCrashAfterACheckpointSyncBeforeItsRecord() async throws {
        try await crash(at: .checkpointSynced, arrival: 2)
    }

    func testCrashAfterASegmentedCheckpointSyncBeforeItsRecord() async throws {
        try await crash(at: .segmentsSynced, arrival: 2)
    }

    func testCrashInsideTheTransactionOfASegmentedCheckpoint() async throws {
        try await crash(at: .segmentsSaving, arrival: 2)
    }

    func testCrashAfterTheFinalSyncBeforeTheRename() async throws {
        try await crash(at: .fileSynced, arrival: 1)
    }

    func testCrashAfterTheRenameBeforeTheFinishedRow() async throws {
        try await crash(at: .published, arrival: 1)
    }

    /// The third file published is usually the one into a directory (two run at once in a
    /// session: the big ones end first, then the two small ones in turn): found among the names tried.
    func testCrashAfterTheThirdRenameBeforeItsFinishedRow() async throws {
        try await crash(at: .published, arrival: 3)
    }

    /// A body of unknown length (chunked) is recorded whole before its rename, so the restart
    /// that finds it published reports every byte (it reported the last checkpoint: none here).
    func testAChunkedFilePublishedBeforeACrashKeepsItsLength() async throws {
        let content = Self.content(50_000, seed: 5)
        var route = Route(content: content)
        route.chunked = true
        http.set("/chunked", route)
        stopDaemon()
        daemonEnvironment = [CrashPoint.environmentVariable: "\(CrashPoint.published.rawValue):1"]
        try await startDaemon()
        let path = try await start(http.url("/chunked"), directory.file("chunked.bin"))
        try await waitForCrash(at: .published, log: daemonLog)
        daemonEnvironment = [:]
        try await startDaemon()
        let state = try await waitState(path, ["finished", "failed", "cancelled"])
        XCTAssertEqual(state, "finished")
        XCTAssertEqual(sha256(ofFile: directory.file("chunked.bin")), Self.sha256(content))
        let written = try await property(path, "BytesWritten")?.int64Value
        XCTAssertEqual(written, Int64(content.count))
        XCTAssertEqual(http.requests(for: "/chunked").count, 1, "found published, not fetched again")
    }

    func testCrashBetweenTheLastEndAndItsPendingCompletion() async throws {
        try await crash(at: .endedUnreported, arrival: 1)
    }

    func testCrashAfterTheCompletionHandlerAnsweredBeforeTheRecord() async throws {
        try await crash(at: .completionAnswered, arrival: 1)
    }

    /// Inside the third migration of a fresh state directory: the next start finishes the
    /// migrations and serves downloads.
    func testCrashInsideAMigration() async throws {
        stopDaemon()
        try FileManager.default.removeItem(atPath: stateDirectory)
        daemonEnvironment = [CrashPoint.environmentVariable: "\(CrashPoint.migrating.rawValue):3"]
        try launchDaemon()
        try await waitForCrash(at: .migrating, log: daemonLog)
        daemonEnvironment = [:]
        try await startDaemon()
        let content = Self.content(100_000, seed: 9)
        http.set("/after", Route(content: content))
        let path = try await start(http.url("/after"), directory.file("after.bin"))
        let state = try await waitState(path, ["finished", "failed"])
        XCTAssertEqual(state, "finished")
        XCTAssertEqual(sha256(ofFile: directory.file("after.bin")), Self.sha256(content))
    }

    /// An atomic group of three files killed after its decision to publish is recorded (before
    /// any rename), or after its first rename: the restart publishes the rest, each file in place
    /// exactly once, nothing fetched again, one `GroupFinished`.
    private func crashInAtomicGroup(at point: CrashPoint) async throws {
        let contents = (0..<3).map { Self.content(60_000 * ($0 + 1), seed: UInt32(60 + $0)) }
        for (index, content) in contents.enumerated() { http.set("/a\(index)", Route(content: content)) }
        stopDaemon()
        daemonEnvironment = [CrashPoint.environmentVariable: "\(point.rawValue):1"]
        try await startDaemon()
        let crashedLog = daemonLog
        let entries = contents.indices.map {
            DBusValue.structure([.string(http.url("/a\($0)")), .string(directory.file("a\($0).bin")), .vardict([:])])
        }
        let reply = try await call(
            "StartGroup",
            [
                .array(element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]), entries),
                .vardict(["atomic": .boolean(true)]),
            ])
        let group = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitForCrash(at: point, log: crashedLog)
        let before = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".bin") }
        // The files are renamed by their runs at once: after the first rename, others may be too.
        XCTAssertTrue(point == .groupDecided ? before.isEmpty : !before.isEmpty, "renamed before the crash: \(before)")
        daemonEnvironment = [:]
        try await startDaemon()
        try await until("GroupFinished after the restart", seconds: 60) {
            signalNames(for: group).contains("GroupFinished")
        }
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("a\(index).bin")), Self.sha256(content))
            XCTAssertEqual(
                http.requests(for: "/a\(index)").map(\.bodyBytesSent).reduce(0, +), content.count, "fetched once")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasPrefix("a") || $0.hasSuffix(".part")
        }
        XCTAssertEqual(
            names.sorted(), ["a0.bin", "a1.bin", "a2.bin"], "each file in place exactly once, no partial left")
        XCTAssertEqual(signalNames(for: group).filter { $0 == "GroupFinished" }.count, 1)
    }

    func testCrashAfterAGroupsDecisionBeforeItsRenames() async throws {
        try await crashInAtomicGroup(at: .groupDecided)
    }

    func testCrashBetweenAGroupsRenames() async throws {
        try await crashInAtomicGroup(at: .published)
    }

    /// Every point has a run here or in FileHelperTests.
    func testEveryPointIsExercised() {
        let here: Set<CrashPoint> = [
            .checkpointSynced, .segmentsSynced, .segmentsSaving, .fileSynced, .published, .endedUnreported,
            .completionAnswered, .migrating, .groupDecided,
        ]
        XCTAssertEqual(here.union([.helperCreated]), Set(CrashPoint.allCases))
    }
}
