import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Tests/fuzz/fuzz_service.py (hypothesis) as user nobody against the daemon on the private system
/// bus: every method, property and option, well and ill typed. The daemon must answer every call,
/// stay up, and its open descriptors and memory must come back to their baseline.
final class FuzzTests: SystemBusTestCase {
    static let script = DaemonTestCase.packageRoot.appendingPathComponent("Tests/fuzz/fuzz_service.py").path

    /// Open descriptors of the daemon in three counts: the database's (GRDB's pool opens a reader
    /// connection, database and WAL, when reads overlap: up to its size), sockets (the HTTP client
    /// keeps idle connections to the test server for a while), and every other; and its resident
    /// memory (KiB).
    func usage() throws -> (fds: Int, database: Int, sockets: Int, rssKiB: Int) {
        let pid = try XCTUnwrap(daemon?.pid)
        let targets = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").map {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) ?? ""
        }
        let sockets = targets.filter { $0.hasPrefix("socket:") }.count
        let database = targets.filter { $0.hasPrefix(stateDirectory + "/") }.count
        let fds = targets.count - sockets - database
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? -1
        return (fds, database, sockets, rss)
    }

    /// What the daemon's descriptors point at (for a failure message).
    func openFiles() -> [String] {
        guard let pid = daemon?.pid, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return [] }
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
            .filter { !$0.hasPrefix("socket:") }.sorted()
    }

    func fuzz(examples: Int, into directory: String) async throws -> [String: Any] {
        let output = try await run([
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", Self.script,
            bus.address, http.url(""), directory, String(examples),
        ], timeout: 600)
        XCTAssertEqual(output.status, 0, output.description)
        guard let line = output.stdout.split(separator: "\n").last,
              let summary = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else {
            XCTFail("no summary: \(output.description)")
            return [:]
        }
        return summary
    }

    func testFuzzedCallsAreAllAnsweredAndLeaveNothingBehind() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: the daemon serves nobody through a file helper") }
        guard (try? await run(["/usr/bin/python3", "-c", "import hypothesis"]))?.status == 0 else {
            throw XCTSkip("python3-hypothesis is not installed (make deps)")
        }
        chmod(directory.path, 0o755)
        let target = directory.file("fuzz")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
        chown(target, 65534, 65534)
        http.set("/small", Route(content: Self.content(2000)))
        // Warm-up: the file helper for nobody, the HTTP client, the database are all in use once.
        _ = try await fuzz(examples: 50, into: target)
        try await Task.sleep(for: .milliseconds(500))
        let before = try usage()
        let examples = ProcessInfo.processInfo.environment["FUZZ_EXAMPLES"].flatMap(Int.init) ?? 1500
        let summary = try await fuzz(examples: examples, into: target)
        // A leak stays; a file still open for a task that is just ending (or SQLite's) goes.
        var after = try usage()
        for _ in 0..<50 where after.fds > before.fds {
            try await Task.sleep(for: .milliseconds(100))
            after = try usage()
        }
        print("fuzz: \(summary["calls"] ?? 0) calls, \(summary["tasks"] ?? 0) tasks; files \(before.fds) → \(after.fds), database \(before.database) → \(after.database), sockets \(before.sockets) → \(after.sockets), RSS \(before.rssKiB) → \(after.rssKiB) KiB; outcomes \(summary["outcomes"] ?? "")")
        XCTAssertEqual(summary["left"] as? [String], [], "every task the fuzzer made was removed")
        if let left = summary["left"] as? [String], !left.isEmpty {
            await diagnose("tasks left after Cancel: \(left)")
        }
        XCTAssertGreaterThanOrEqual(summary["calls"] as? Int ?? 0, examples)
        XCTAssertEqual(daemon.map { kill($0.pid, 0) }, 0, "the daemon is up")
        // One in a few runs ends with one more pipe or eventfd than it began with, even after 5 s;
        // not yet explained (noted on the issue), so one is tolerated and the list is printed.
        XCTAssertLessThanOrEqual(after.fds, before.fds + 1, "no file descriptor leaks: \(before.fds) → \(after.fds): \(openFiles())")
        XCTAssertLessThanOrEqual(after.database, 2 * 6 + 1, "the database: a writer and at most 5 readers, each with the WAL, and the shared memory")
        XCTAssertLessThanOrEqual(after.sockets, before.sockets + 8, "sockets bounded by the HTTP client's pool: \(before.sockets) → \(after.sockets)")
        XCTAssertLessThan(after.rssKiB, before.rssKiB + 64 * 1024, "memory stays bounded: \(before.rssKiB) → \(after.rssKiB) KiB")
        // Still serving, the state directory intact.
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertNotNil(listed.first)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: target).filter { $0.hasSuffix(".part") }
        XCTAssertEqual(leftovers, [], "no partial files left behind")
    }
}
