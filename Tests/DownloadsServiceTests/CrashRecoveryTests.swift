import DBus
import DownloadsAPI
import Foundation
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// kill -9 at random moments, and SIGTERM: every task finishes with the right bytes, and each
/// crash costs at most one checkpoint of refetched data.
final class CrashRecoveryTests: DaemonTestCase {
    func testKillNineRepeatedlyDuringSeveralDownloads() async throws {
        let size = 6_000_000
        let rate = 3_000_000
        var paths: [(ObjectPath, String, [UInt8], String)] = []
        for n in 0..<3 {
            let content = Self.content(size, seed: UInt32(n + 10))
            var route = Route(content: content)
            route.bytesPerSecond = rate
            http.set("/k\(n)", route)
            let target = directory.file("k\(n).bin")
            paths.append((try await start(http.url("/k\(n)"), target), target, content, "/k\(n)"))
        }
        var crashes = 0
        for round in 0..<3 {
            try await Task.sleep(for: .milliseconds(Int.random(in: 400...1200)))
            killDaemon()
            crashes += 1
            try await startDaemon()
            _ = round
        }
        for (path, target, content, _) in paths {
            let state = try await waitState(path, ["finished", "failed"], seconds: 120)
            XCTAssertEqual(state, "finished")
            XCTAssertEqual(sha256(ofFile: target), Self.sha256(content), target)
        }
        // A checkpoint is every second or every 64 MiB, whichever comes first: at this rate one
        // second's worth; allow one more second for bytes in flight in socket buffers.
        let checkpoint = min(64 * 1024 * 1024, rate)
        for (_, _, content, route) in paths {
            let served = http.requests(for: route).map(\.bodyBytesSent).reduce(0, +)
            XCTAssertLessThanOrEqual(
                served - content.count, crashes * (checkpoint + rate), "\(route) refetched too much")
        }
        XCTAssertFalse(
            ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).contains {
                $0.hasSuffix(".part")
            })
    }

    func testKillNineDuringASegmentedDownloadKeepsEveryRange() async throws {
        let size = 12 << 20
        let rate = 500_000
        let content = Self.content(size, seed: 42)
        var route = Route(content: content)
        route.bytesPerSecond = rate
        http.set("/seg", route)
        let target = directory.file("seg.bin")
        let path = try await start(http.url("/seg"), target, ["connections": .uint32(4)])
        try await waitBytes(path, atLeast: 3_000_000)
        // A checkpoint of every range holding what had arrived by now (waited for, not slept on:
        // on a busy machine a fixed second and a half was sometimes not enough).
        let received = try await property(path, "BytesWritten")?.int64Value ?? 0
        let id = try XCTUnwrap(DownloadsAPI.taskID(path))
        try await until("a checkpoint of every range", seconds: 30) {
            let durable = try await DatabaseQueue(path: self.stateDirectory + "/downloads.sqlite").read { db in
                try Int64.fetchOne(db, sql: "SELECT durableOffset FROM task WHERE id = ?", arguments: [Int64(id)]) ?? 0
            }
            return durable >= received
        }
        let before = http.requests(for: "/seg").count
        killDaemon()
        try await startDaemon()
        let state = try await waitState(path, ["finished", "failed"], seconds: 120)
        XCTAssertEqual(state, "finished")
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        // After the crash every range resumed where it was durable: four ranged requests, none
        // from a range's beginning, and what was fetched again is at most a checkpoint's worth
        // (plus bytes in flight) per connection.
        let after = http.requests(for: "/seg").dropFirst(before)
        let starts = after.prefix(4).compactMap { $0.range }
        XCTAssertEqual(starts.count, 4, "\(after.map { $0.range ?? "-" })")
        let quarters = (0..<4).map { "bytes=\($0 * size / 4)-" }
        XCTAssertFalse(starts.contains { start in quarters.contains { start.hasPrefix($0) } }, "\(starts)")
        XCTAssertTrue(after.allSatisfy { $0.ifRange == "\"v1\"" })
        let served = http.requests(for: "/seg").map(\.bodyBytesSent).reduce(0, +)
        XCTAssertLessThanOrEqual(served - size, 4 * 2 * rate, "refetched too much")
    }

    func testSigtermCheckpointsAndTheNextStartCarriesOn() async throws {
        let content = Self.content(3_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 2_000_000
        http.set("/t", route)
        let target = directory.file("t.bin")
        let path = try await start(http.url("/t"), target)
        try await waitBytes(path, atLeast: 500_000)
        stopDaemon()
        let onDisk =
            (try? FileManager.default.attributesOfItem(atPath: directory.file(".org.example.Downloads-1.part"))[.size]
                as? Int) ?? -1
        XCTAssertGreaterThan(onDisk, 0)
        try await startDaemon()
        try await waitState(path, ["finished"])
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/t").last?.range, "bytes=\(onDisk)-", "a graceful stop loses nothing")
    }
}
