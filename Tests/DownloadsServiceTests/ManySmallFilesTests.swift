import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// A thousand small downloads started at once (issue 24's case, not timed): every one finishes
/// with the source's bytes, every `Finished` comes after its file is in place, and a kill -9 in
/// the middle of them loses no task.
final class ManySmallFilesTests: DaemonTestCase {
    static let count = 1000

    /// Files whose `Finished` arrived before they were in place (checked when the signal arrives).
    private let early = NIOLockedValueBox([String]())
    private let finishedPaths = NIOLockedValueBox(Set<String>())

    /// The files; the last `stalling` stall after their first kilobyte, once (their next
    /// request gets the whole file).
    private func serve(stalling: Int = 0) -> [[UInt8]] {
        (0..<Self.count).map { i in
            let content = Self.content(2000 + i % 7 * 1000, seed: UInt32(i + 1))
            var route = Route(content: content)
            if i >= Self.count - stalling {
                route.stallAfter = 1000
                route.misbehaveTimes = 1
            }
            http.set("/s\(i)", route)
            return content
        }
    }

    private func watchFinished() async throws {
        let early = self.early, finished = self.finishedPaths
        try await client.subscribe(MatchRule(interface: "org.example.Downloads", member: "Finished")) { message in
            let arguments = (try? message.arguments()) ?? []
            guard let path = arguments.first?.objectPathValue?.rawValue,
                let location = arguments.dropFirst().first?.stringValue
            else { return }
            if !FileManager.default.fileExists(atPath: location) { early.withLockedValue { $0.append(location) } }
            finished.withLockedValue { _ = $0.insert(path) }
        }
    }

    /// One Start after another, without waiting for any download (the bench keeps 64 in flight).
    private func startAll(_ targets: [(String, String)]) async throws -> [ObjectPath] {
        var paths: [ObjectPath] = []
        for (url, destination) in targets { paths.append(try await start(url, destination)) }
        return paths
    }

    func testAThousandSmallDownloadsAllFinishInPlace() async throws {
        let contents = serve()
        try await watchFinished()
        let paths = try await startAll((0..<Self.count).map { (http.url("/s\($0)"), directory.file("s\($0).bin")) })
        try await until("every Finished", seconds: 240) {
            self.finishedPaths.withLockedValue { $0.count } == Self.count
        }
        XCTAssertEqual(early.withLockedValue { $0 }, [], "Finished before the file was in place")
        XCTAssertEqual(Set(paths.map(\.rawValue)), finishedPaths.withLockedValue { $0 })
        for (i, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("s\(i).bin")), Self.sha256(content), "s\(i)")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertFalse(names.contains { $0.hasSuffix(".part") })
        // downloadsctl lists them all from one GetManagedObjects, each as finished at its file.
        let listed = try await run([
            PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "list", "--json",
        ])
        XCTAssertEqual(listed.status, 0, listed.description)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.count, Self.count)
        XCTAssertEqual(
            rows.compactMap { $0["id"] as? Int }, paths.compactMap { DownloadsAPI.taskID($0).map(Int.init) }.sorted())
        XCTAssertEqual(Set(rows.compactMap { $0["state"] as? String }), ["finished"])
        XCTAssertEqual(rows.first?["destination"] as? String, directory.file("s0.bin"))
    }

    func testKillNineAmongAThousandSmallDownloadsLosesNoTask() async throws {
        // The last eight stall, so some are still to come when the kill does (the others may
        // all be done by then: a thousand take about a second).
        let contents = serve(stalling: 8)
        let paths = try await startAll((0..<Self.count).map { (http.url("/s\($0)"), directory.file("s\($0).bin")) })
        // Somewhere in the middle: some finished, some not.
        try await until("a first file", seconds: 60) {
            FileManager.default.fileExists(atPath: self.directory.file("s0.bin"))
        }
        killDaemon()
        let published = (0..<Self.count).filter {
            FileManager.default.fileExists(atPath: self.directory.file("s\($0).bin"))
        }.count
        XCTAssertLessThan(published, Self.count, "killed in the middle of them")
        try await startDaemon()
        for path in paths {
            let state = try await waitState(path, ["finished", "failed", "cancelled"], seconds: 240)
            XCTAssertEqual(state, "finished", path.rawValue)
        }
        for (i, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("s\(i).bin")), Self.sha256(content), "s\(i)")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertFalse(names.contains { $0.hasSuffix(".part") })
        XCTAssertFalse(names.contains { $0.contains(" (1)") }, "nothing published twice")
    }
}
