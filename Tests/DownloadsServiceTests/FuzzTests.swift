import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Tests/fuzz/fuzz_service.py (hypothesis) as user nobody against the daemon on the private system
/// bus: every method, property and option, well and ill typed. The daemon must answer every call,
/// stay up, and its open descriptors and memory must come back to their baseline.
final class FuzzTests: SystemBusTestCase {
    static let script = DaemonTestCase.packageRoot.appendingPathComponent("Tests/fuzz/fuzz_service.py").path

    /// Open descriptors of the daemon in four counts: the database's (GRDB's pool opens a reader
    /// connection, database and WAL, when reads overlap: up to its size), sockets (the HTTP client
    /// keeps idle connections to the test server for a while), timers, and every other; and its
    /// resident memory (KiB).
    ///
    /// Timers are counted apart because they are made lazily and never leak: libdispatch opens one
    /// timerfd per clock (wall, uptime, monotonic) the first time a timer of that clock is armed,
    /// and keeps it. A run whose first back-off (`Task.sleep` on the continuous clock, which is
    /// libdispatch's monotonic one, CLOCK_BOOTTIME) came during the fuzzing rather than the
    /// warm-up ended with one more descriptor than it began with: the "one more pipe or eventfd"
    /// this test used to tolerate was that timerfd (found by counting descriptors by kind and
    /// timers by clock, before and after). So timers are bounded instead: one per NIO event loop
    /// (each has its own epoll) and at most libdispatch's three.
    func usage() throws -> (
        fds: Int, database: Int, sockets: Int, timers: Int, polls: Int, rssKiB: Int, others: [String]
    ) {
        let pid = try XCTUnwrap(daemon?.pid)
        let targets = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").map { fd -> String in
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? ""
            guard target == "anon_inode:[timerfd]" else { return target }
            // Which clock (0 realtime, 1 monotonic, 7 boottime), for the message.
            let info = (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            let clock =
                info.split(separator: "\n").first { $0.hasPrefix("clockid:") }?.split(separator: " ").last ?? "?"
            return "timerfd clock \(clock)"
        }
        let sockets = targets.filter { $0.hasPrefix("socket:") }.count
        let database = targets.filter { $0.hasPrefix(stateDirectory + "/") }.count
        let timers = targets.filter { $0.hasPrefix("timerfd clock") }.count
        let polls = targets.filter { $0 == "anon_inode:[eventpoll]" }.count
        let fds = targets.count - sockets - database - timers
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let rss =
            status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? -1
        let others = targets.filter { !$0.hasPrefix("socket:") && !$0.hasPrefix(stateDirectory + "/") }
        return (fds, database, sockets, timers, polls, rss, others)
    }

    func fuzz(examples: Int, into directory: String) async throws -> [String: Any] {
        let output = try await run(
            [
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
        func counted(_ targets: [String]) -> [String: Int] { targets.reduce(into: [:]) { $0[$1, default: 0] += 1 } }
        let (was, now) = (counted(before.others), counted(after.others))
        let changed = Set(was.keys).union(now.keys).filter { was[$0] != now[$0] }.sorted().map {
            "\($0): \(was[$0] ?? 0) → \(now[$0] ?? 0)"
        }
        print("fuzz: descriptors that changed: \(changed)")
        print(
            "fuzz: \(summary["calls"] ?? 0) calls, \(summary["tasks"] ?? 0) tasks; files \(before.fds) → \(after.fds), timers \(before.timers) → \(after.timers), database \(before.database) → \(after.database), sockets \(before.sockets) → \(after.sockets), RSS \(before.rssKiB) → \(after.rssKiB) KiB; outcomes \(summary["outcomes"] ?? "")"
        )
        XCTAssertEqual(summary["left"] as? [String], [], "every task the fuzzer made was removed")
        if let left = summary["left"] as? [String], !left.isEmpty {
            await diagnose("tasks left after Cancel: \(left)")
        }
        XCTAssertGreaterThanOrEqual(summary["calls"] as? Int ?? 0, examples)
        XCTAssertEqual(daemon.map { kill($0.pid, 0) }, 0, "the daemon is up")
        XCTAssertLessThanOrEqual(
            after.fds, before.fds, "no file descriptor leaks: \(before.fds) → \(after.fds): \(changed)")
        // libdispatch's epoll is one of them; every other is an event loop's, with one timer each.
        XCTAssertLessThanOrEqual(
            after.timers, after.polls - 1 + 3, "timers: \(before.timers) → \(after.timers), \(after.polls) epolls")
        XCTAssertLessThanOrEqual(
            after.database, 2 * 6 + 1,
            "the database: a writer and at most 5 readers, each with the WAL, and the shared memory")
        XCTAssertLessThanOrEqual(
            after.sockets, before.sockets + 8,
            "sockets bounded by the HTTP client's pool: \(before.sockets) → \(after.sockets)")
        XCTAssertLessThan(
            after.rssKiB, before.rssKiB + 64 * 1024, "memory stays bounded: \(before.rssKiB) → \(after.rssKiB) KiB")
        // Still serving, the state directory intact.
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertNotNil(listed.first)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: target).filter { $0.hasSuffix(".part") }
        XCTAssertEqual(leftovers, [], "no partial files left behind")
    }
}
