import DBus
import DownloadsAPI
import Foundation
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// downloadsctl run as a binary against the real daemon on a private bus.
final class DownloadsctlTests: DaemonTestCase {
    static let ctl = PackageRoot.debugBinary("downloadsctl")

    func ctl(_ arguments: [String], stdin: Data? = nil, timeout: TimeInterval = 60) async throws -> ProcessRunner.Output
    {
        try await ProcessRunner.run(
            [Self.ctl, "--address", bus.address] + arguments, environment: bus.environment, stdin: stdin,
            timeout: timeout)
    }

    /// `--max-tasks-per-user` for the daemon's next start (nil: its default).
    var tasksPerUser: Int?
    override var extraArguments: [String] { tasksPerUser.map { ["--max-tasks-per-user", "\($0)"] } ?? [] }

    func lines(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init)
    }

    func testGetPrintsThePathAndPlainProgressWhenNotATerminal() async throws {
        let content = Self.content(2_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_500_000
        http.set("/file.bin", route)
        let out = try await ctl(["get", http.url("/file.bin"), "-o", directory.file("got.bin")])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(out.stdout, directory.file("got.bin") + "\n")
        XCTAssertEqual(sha256(ofFile: directory.file("got.bin")), Self.sha256(content))
        let progress = lines(out.stderr)
        XCTAssertTrue(progress.contains { $0.hasPrefix("100% 1.9 MiB of 1.9 MiB") }, out.stderr)
        XCTAssertTrue(progress.last?.hasPrefix("downloaded 1.9 MiB in ") == true, out.stderr)
        XCTAssertFalse(out.stderr.contains("\r"), "no bar drawn into a pipe")
    }

    /// Several URLs, as arguments and as a list (`-i`, with a comment and a blank line): each file
    /// under its server's name in the directory, each path printed as it lands, each finished task
    /// removed from the list; a 404 is one line naming its URL and task, kept to be looked at, and
    /// the exit status 1.
    func testGetSeveralURLsIntoADirectory() async throws {
        var contents: [String: [UInt8]] = [:]
        for (index, name) in ["a.bin", "b.bin", "c.bin", "d.bin"].enumerated() {
            contents[name] = Self.content(30_000 + index * 1_000, seed: UInt32(index + 7))
            http.set("/\(name)", Route(content: contents[name] ?? []))
        }
        var gone = Route(content: [])
        gone.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/gone.bin", gone)
        let list = directory.file("urls.txt")
        try
            "# the rest\n\n  \(http.url("/c.bin"))  \r\n\(http.url("/gone.bin").replacingOccurrences(of: "http://", with: "http://u:secret@"))\n\(http.url("/d.bin"))\n"
            .write(toFile: list, atomically: true, encoding: .utf8)
        let into = directory.file("many")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)

        let out = try await ctl(["get", http.url("/a.bin"), http.url("/b.bin"), "-i", list, "-o", into])
        XCTAssertEqual(out.status, 1, out.description)
        XCTAssertEqual(Set(lines(out.stdout)), Set(contents.keys.map { into + "/" + $0 }), out.description)
        for (name, content) in contents {
            XCTAssertEqual(sha256(ofFile: into + "/" + name), Self.sha256(content), name)
        }
        let errors = lines(out.stderr)
        XCTAssertEqual(errors.filter { $0.hasPrefix("failed: ") }.count, 1, out.stderr)
        XCTAssertTrue(
            errors.contains {
                $0.hasPrefix("failed: \(http.url("/gone.bin")): the server answered 404 Not Found (task ")
            }, out.stderr)
        XCTAssertFalse(out.stderr.contains("secret"), "a URL's password is not printed: \(out.stderr)")
        XCTAssertEqual(errors.count, 3, "the failure, the summary and the exit's reason: \(out.stderr)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("downloaded 4 of 5 files, 123 KiB in ") }, out.stderr)
        XCTAssertEqual(errors.last, "downloadsctl: 1 of 5 downloads failed")
        XCTAssertFalse(out.stderr.contains("\r"), "no status line drawn into a pipe")
        let listed = try await ctl(["list", "--json"])
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(
            rows.map { $0["state"] as? String }, ["failed"],
            "the finished tasks were removed, the failed one kept: \(listed.stdout)")
        XCTAssertEqual(rows.first?["url"] as? String, http.url("/gone.bin"))

        // What names one file is refused for several; and several go into a directory only.
        let checksum = try await ctl([
            "get", http.url("/a.bin"), http.url("/b.bin"), "--sha256", String(repeating: "0", count: 64), "-o", into,
        ])
        XCTAssertEqual(checksum.status, 64, checksum.description)
        XCTAssertTrue(checksum.stderr.contains("--checksum, --sha256 and --mirror name one file"), checksum.stderr)
        let notADirectory = try await ctl(["get", http.url("/a.bin"), http.url("/b.bin"), "-o", into + "/a.bin"])
        XCTAssertEqual(notADirectory.status, 1, notADirectory.description)
        XCTAssertEqual(
            notADirectory.stderr, "downloadsctl: several URLs go into a directory, and \(into)/a.bin is not one\n")
        let nothing = directory.file("nothing.txt")
        try "# nothing yet\n\n".write(toFile: nothing, atomically: true, encoding: .utf8)
        let empty = try await ctl(["get", "-i", nothing, "-o", into])
        XCTAssertEqual(empty.status, 1, empty.description)
        XCTAssertEqual(empty.stderr, "downloadsctl: no URLs in \(nothing)\n")
    }

    /// A list longer than the caller's task quota, read from standard input: the URLs the service
    /// refuses for the quota wait for a task to end and are started then, so all of them land.
    func testGetAListLongerThanTheQuotaFromStandardInput() async throws {
        stopDaemon()
        tasksPerUser = 4
        try await startDaemon()
        var expected: [String: String] = [:]
        for index in 0..<25 {
            let content = Self.content(5_000 + index, seed: UInt32(index + 100))
            http.set("/q\(index).bin", Route(content: content))
            expected["q\(index).bin"] = Self.sha256(content)
        }
        let into = directory.file("quota")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)
        let text = (0..<25).map { http.url("/q\($0).bin") }.joined(separator: "\n")
        let out = try await ctl(["get", "-i", "-", "-o", into], stdin: Data(text.utf8))
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(lines(out.stdout).count, 25, out.description)
        for (name, digest) in expected {
            XCTAssertEqual(sha256(ofFile: into + "/" + name), digest, name)
        }
        XCTAssertEqual(lines(out.stderr).count, 1, out.stderr)
        XCTAssertTrue(out.stderr.hasPrefix("downloaded 25 of 25 files, 122 KiB in "), out.stderr)
        let listed = try await ctl(["list"])
        XCTAssertEqual(
            lines(listed.stdout).count, 1,
            "only the header: every task was removed once its file landed: \(listed.stdout)")
    }

    /// While the service waits to try again, `get` says why, and the task's `ErrorMessage` holds
    /// the reason until it runs again.
    func testGetSaysWhyItIsRetrying() async throws {
        let content = Self.content(20_000)
        var route = Route(content: content)
        route.failFirst = (2, 503, "1")
        http.set("/busy.bin", route)
        let out = try await ctl(["get", http.url("/busy.bin"), "-o", directory.file("busy.bin")])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertTrue(
            lines(out.stderr).contains("retrying after: the server answered 503 Service Unavailable"), out.stderr)
        XCTAssertEqual(sha256(ofFile: directory.file("busy.bin")), Self.sha256(content))
        let listed = try await ctl(["list", "--json"])
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.first?["state"] as? String, "finished")
        XCTAssertEqual(rows.first?["error"] as? String, "", "the retry's error is gone once it finished")
        XCTAssertEqual(rows.first?["error_message"] as? String, "")
    }

    func testGetWithConnectionsFetchesRangesAtOnce() async throws {
        let content = Self.content(6 << 20)
        var route = Route(content: content)
        route.bytesPerSecond = 3_000_000
        http.set("/big.bin", route)
        let out = try await ctl(["get", http.url("/big.bin"), "-o", directory.file("big.bin"), "--connections", "3"])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: directory.file("big.bin")), Self.sha256(content))
        let ranges = http.requests(for: "/big.bin").compactMap(\.range)
        XCTAssertTrue(
            ranges.contains("bytes=\(2 << 20)-\((4 << 20) - 1)")
                && ranges.contains("bytes=\(4 << 20)-\((6 << 20) - 1)"), "\(ranges)")
        let refused = try await ctl(["get", http.url("/big.bin"), "-o", directory.file("x"), "--connections", "17"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("connections"), refused.stderr)
    }

    func testGetDrawsABarOnAPseudoTerminal() async throws {
        let content = Self.content(1_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        http.set("/tty.bin", route)
        let command = [
            Self.ctl, "--address", bus.address, "get", http.url("/tty.bin"), "-o", directory.file("tty.bin"),
        ]
        .map { "'\($0)'" }.joined(separator: " ")
        let out = try await run(["script", "-qefc", command, "/dev/null"], timeout: 60)
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertTrue(out.stdout.contains("\r\u{1B}[K"), "the bar redraws in place: \(out.stdout.debugDescription)")
        XCTAssertTrue(out.stdout.contains("100% ["), out.stdout)
        XCTAssertTrue(out.stdout.contains(directory.file("tty.bin")))
        XCTAssertEqual(sha256(ofFile: directory.file("tty.bin")), Self.sha256(content))
    }

    func testStartListStatusWaitWithJSON() async throws {
        http.set("/a", Route(content: Self.content(50_000)))
        let started = try await ctl(["start", http.url("/a"), directory.file("a"), "--session", "cli"])
        XCTAssertEqual(started.status, 0, started.description)
        let id = started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNotNil(UInt64(id), started.stdout)
        let waited = try await ctl(["wait", id])
        XCTAssertEqual(waited.status, 0, waited.description)
        XCTAssertEqual(waited.stdout, "task \(id) finished: \(directory.file("a"))\n")
        let listed = try await ctl(["list", "--json"])
        XCTAssertEqual(listed.status, 0, listed.description)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(
            Set(rows[0].keys),
            [
                "id", "session", "url", "destination", "state", "bytes_written", "bytes_expected", "error",
                "error_message", "waiting_for",
                "background", "title", "description", "metadata", "app", "kind", "source", "response_status",
                "bytes_confirmed",
                "priority", "max_bytes_per_second", "speed",
            ])
        XCTAssertEqual(rows[0]["app"] as? String, "", "a host caller's task belongs to no app")
        XCTAssertEqual(rows[0]["state"] as? String, "finished")
        XCTAssertEqual(rows[0]["bytes_written"] as? Int, 50_000)
        XCTAssertEqual(rows[0]["session"] as? String, "cli")
        let status = try await ctl(["status", "/org/example/Downloads/tasks/\(id)", "--json"])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(object["destination"] as? String, directory.file("a"))
        let table = try await ctl(["list"])
        XCTAssertTrue(lines(table.stdout).first?.hasPrefix("ID") == true, table.stdout)
        XCTAssertTrue(table.stdout.contains("finished"), table.stdout)
        // An ended task cannot be paused (the reason says which can) and is removed by cancel.
        let pause = try await ctl(["pause", id])
        XCTAssertEqual(pause.status, 1, pause.description)
        XCTAssertEqual(
            pause.stderr,
            "downloadsctl: task \(id) is finished; only a queued, running or retrying task can be paused\n")
        let removed = try await ctl(["cancel", id])
        XCTAssertEqual(removed.stdout, "removed task \(id)\n", removed.description)
        let empty = try await ctl(["list"])
        XCTAssertEqual(empty.stdout, "no tasks\n")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertTrue(log.contains("task \(id) of uid \(getuid()): removed"), log)
    }

    /// --title, --description, --metadata and --checksum reach the task; list and status show them
    /// (escaped), list --metadata finds by them; --begin-at holds a task until then.
    func testTaskFieldsFromTheCommandLine() async throws {
        let content = Self.content(80_000, seed: 41)
        http.set("/ep.mp3", Route(content: content))
        http.set("/other", Route(content: Self.content(100, seed: 42)))
        let got = try await ctl([
            "get", http.url("/ep.mp3"), "-o", directory.file("ep.mp3"), "--title", "Episode \u{202E}24",
            "--description",
            "About logs", "--metadata", "app=podcasts", "--metadata", "episode=42", "--checksum",
            "md5:" + TestData.digest("md5", content),
        ])
        XCTAssertEqual(got.status, 0, got.description)
        XCTAssertEqual(sha256(ofFile: directory.file("ep.mp3")), Self.sha256(content))
        let other = try await ctl(["get", http.url("/other"), "-o", directory.file("other"), "--metadata", "app=news"])
        XCTAssertEqual(other.status, 0, other.description)
        let found = try await ctl(["list", "--json", "--metadata", "app=podcasts"])
        let rows = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(found.stdout.utf8)) as? [[String: Any]], found.description)
        XCTAssertEqual(rows.count, 1, found.stdout)
        XCTAssertEqual(rows.first?["title"] as? String, "Episode \u{202E}24", "JSON carries the text as it is")
        XCTAssertEqual(rows.first?["description"] as? String, "About logs")
        XCTAssertEqual(rows.first?["metadata"] as? [String: String], ["app": "podcasts", "episode": "42"])
        let id = try XCTUnwrap(rows.first?["id"] as? Int)
        let status = try await ctl(["status", String(id)])
        XCTAssertTrue(
            status.stdout.contains("title:       Episode \\u{202e}24\n"),
            "a bidi override escaped on a terminal: \(status.stdout)")
        XCTAssertTrue(status.stdout.contains("description: About logs\n"), status.stdout)
        XCTAssertTrue(status.stdout.contains("metadata:    app = podcasts\n"), status.stdout)
        let table = try await ctl(["list", "--metadata", "app=news"])
        XCTAssertEqual(lines(table.stdout).count, 2, "the header and the one task: \(table.stdout)")
        let none = try await ctl(["list", "--metadata", "app=radio"])
        XCTAssertEqual(none.stdout, "no tasks\n")

        // --begin-at: an ISO 8601 time an hour ahead holds the task.
        var parts = tm()
        var later = time(nil) + 3_600
        gmtime_r(&later, &parts)
        let iso = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
        let scheduled = try await ctl(["start", http.url("/other"), directory.file("later"), "--begin-at", iso])
        XCTAssertEqual(scheduled.status, 0, scheduled.description)
        let laterID = scheduled.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let waiting = try await ctl(["status", laterID])
        XCTAssertTrue(waiting.stdout.contains("waiting for: begin-time"), waiting.stdout)
        let listed = try await ctl(["list"])
        XCTAssertTrue(listed.stdout.contains("waiting (begin-time)"), listed.stdout)
        let stored =
            try await DatabaseQueue(path: stateDirectory + "/downloads.sqlite").read { db in
                try String.fetchOne(db, sql: "SELECT options FROM task WHERE id = ?", arguments: [Int(laterID) ?? 0])
            } ?? ""
        XCTAssertTrue(stored.contains("\"earliest_begin\":\(later)"), "the ISO time is that second: \(stored)")
        // A time of day is the next such moment; nonsense is a usage error.
        let clock = try await ctl(["start", http.url("/other"), directory.file("clock"), "--begin-at", "03:30"])
        XCTAssertEqual(clock.status, 0, clock.description)
        let bad = try await ctl(["start", http.url("/other"), directory.file("bad"), "--begin-at", "tomorrowish"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("--begin-at 'tomorrowish' is not a time"), bad.stderr)

        // Rates as curl's --limit-rate takes them (K = 1024); a unit without a number is refused.
        let limited = try await ctl([
            "start", http.url("/other"), directory.file("limited"), "--begin-at", "03:30",
            "--limit-rate", "1.5M", "--speed-limit", "10K",
        ])
        XCTAssertEqual(limited.status, 0, limited.description)
        let limitedID = Int(limited.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        let limits =
            try await DatabaseQueue(path: stateDirectory + "/downloads.sqlite").read { db in
                try String.fetchOne(db, sql: "SELECT options FROM task WHERE id = ?", arguments: [limitedID])
            } ?? ""
        XCTAssertTrue(limits.contains("\"max_bytes_per_second\":1572864"), limits)
        XCTAssertTrue(limits.contains("\"low_speed_limit\":10240"), limits)
        let unitOnly = try await ctl(["start", http.url("/other"), directory.file("unit"), "--limit-rate", "K"])
        XCTAssertEqual(unitOnly.status, 64, unitOnly.description)
        XCTAssertTrue(unitOnly.stderr.contains("The value 'K' is invalid for '--limit-rate <bytes>'"), unitOnly.stderr)
    }

    /// A destination that exists is refused in downloadsctl's words, and replaced with --overwrite.
    func testAnExistingDestinationNamesTheOverwriteFlag() async throws {
        let content = Self.content(5_000, seed: 61)
        http.set("/f", Route(content: content))
        let target = directory.file("there")
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        for command in ["get", "start"] {
            let refused = try await ctl([command, http.url("/f"), "-o", target])
            XCTAssertEqual(refused.status, 1, refused.description)
            XCTAssertEqual(refused.stderr, "downloadsctl: \(target) exists; give --overwrite to replace it\n")
        }
        let replaced = try await ctl(["get", http.url("/f"), "-o", target, "--overwrite"])
        XCTAssertEqual(replaced.status, 0, replaced.description)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        // A progress line may come before the 100 % one (a slow run saw "39% 1.9 KiB of 4.9 KiB" first).
        let lines = replaced.stderr.split(whereSeparator: { $0 == "\r" || $0 == "\n" })
        XCTAssertTrue(lines.contains { $0.hasPrefix("100% 4.9 KiB of 4.9 KiB") }, replaced.stderr)
        XCTAssertFalse(replaced.stderr.contains(" 0 B/s"), "no speed before one is measured: \(replaced.stderr)")
    }

    /// `start` takes `-o` as `get` does (into a directory: the server's name), or the destination
    /// as an argument; both at once is a usage error.
    func testStartTakesItsDestinationWithDashOAsGetDoes() async throws {
        let content = Self.content(20_000)
        http.set("/named.bin", Route(content: content))
        let inbox = directory.file("inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: false)
        let started = try await ctl(["start", http.url("/named.bin"), "-o", inbox])
        XCTAssertEqual(started.status, 0, started.description)
        let id = started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let waited = try await ctl(["wait", id])
        XCTAssertEqual(waited.stdout, "task \(id) finished: \(inbox)/named.bin\n", waited.description)
        XCTAssertEqual(sha256(ofFile: inbox + "/named.bin"), Self.sha256(content))
        let both = try await ctl(["start", http.url("/named.bin"), directory.file("x"), "-o", directory.file("y")])
        XCTAssertEqual(both.status, 64, both.description)
        XCTAssertTrue(both.stderr.contains("as an argument or with -o, not both"), both.stderr)
    }

    func testPauseToAFileThenResumeFromIt() async throws {
        let content = Self.content(2_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        http.set("/slow", route)
        let id = try await ctl(["start", http.url("/slow"), directory.file("slow")]).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines)
        try await waitBytes(ObjectPath("/org/example/Downloads/tasks/\(id)"), atLeast: 100_000)
        let data = directory.file("slow.resume")
        let paused = try await ctl(["pause", id, "--resume-data", data])
        XCTAssertEqual(paused.stdout, "paused task \(id)\n", paused.description)
        var info = stat()
        XCTAssertEqual(stat(data, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let cancelled = try await ctl(["cancel", id])
        XCTAssertEqual(cancelled.status, 0, cancelled.description)
        let resumed = try await ctl(["resume", "--resume-data", data])
        XCTAssertEqual(resumed.status, 0, resumed.description)
        let newID = resumed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNotEqual(newID, id)
        let waited = try await ctl(["wait", newID])
        XCTAssertEqual(waited.status, 0, waited.description)
        XCTAssertEqual(sha256(ofFile: directory.file("slow")), Self.sha256(content))
        // The journal says what a caller did to a task, not only what its transfer did.
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        for line in [
            "task \(id) of uid \(getuid()): paused", "task \(id) of uid \(getuid()): cancelled",
            "task \(newID) of uid \(getuid()): resumed from the resume data of task \(id)",
        ] {
            XCTAssertTrue(log.contains(line), "\(line) in \(log)")
        }
    }

    /// Ctrl-C once task 1 of `child` (a `get` or `upload`) is under way: exit status 130, the
    /// command that resumes it, the task paused.
    func interruptExpectingPause(_ child: ChildProcess, file: StaticString = #filePath, line: UInt = #line) async throws
    {
        let path = ObjectPath("/org/example/Downloads/tasks/1")
        try await waitBytes(path, atLeast: 100_000)
        child.signal(SIGINT)
        let status = child.wait()
        let stderr = String(decoding: child.stderr.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(status, 130, stderr, file: file, line: line)
        XCTAssertTrue(
            stderr.contains("paused task 1; resume with: downloadsctl --address \(bus.address) resume 1"), stderr,
            file: file, line: line)
        let state = try await property(path, "State")?.stringValue
        XCTAssertEqual(state, "paused", file: file, line: line)
    }

    func testCtrlCPausesAndSaysHowToResume() async throws {
        var route = Route(content: Self.content(3_000_000))
        route.bytesPerSecond = 500_000
        http.set("/long", route)
        let child = try ChildProcess([
            Self.ctl, "--address", bus.address, "get", http.url("/long"), "-o", directory.file("long"),
        ])
        try await interruptExpectingPause(child)
        let resumed = try await ctl(["resume", "1"])
        XCTAssertEqual(resumed.status, 0, resumed.description)
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertTrue(log.contains("task 1 of uid \(getuid()): paused"), log)
        XCTAssertTrue(log.contains("task 1 of uid \(getuid()): resumed"), log)
    }

    /// `wait` for many tasks, some already ended and some still running, one of them failing:
    /// each end is said once, and the status is 1 for the failure.
    func testWaitForManyTasksHearsTheirEnds() async throws {
        var slow = Route(content: Self.content(200_000, seed: 9))
        slow.bytesPerSecond = 400_000
        http.set("/slow", slow)
        http.set("/quick", Route(content: Self.content(1_000, seed: 10)))
        var gone = Route(content: [])
        gone.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/gone", gone)
        let quick = try await start(http.url("/quick"), directory.file("quick"))
        _ = try await waitState(quick, ["finished"])
        var paths = [quick]
        for index in 0..<30 { paths.append(try await start(http.url("/slow"), directory.file("slow\(index)"))) }
        paths.append(try await start(http.url("/gone"), directory.file("gone")))
        let ids = paths.compactMap { DownloadsAPI.taskID($0).map(String.init) }
        let out = try await ctl(["wait"] + ids, timeout: 120)
        XCTAssertEqual(out.status, 1, out.description)
        let finished = lines(out.stdout)
        XCTAssertEqual(finished.count, 31, out.stdout)
        XCTAssertEqual(
            Set(finished),
            Set(
                [("quick", ids[0])].map { "task \($0.1) finished: \(directory.file($0.0))" }
                    + (0..<30).map { "task \(ids[$0 + 1]) finished: \(directory.file("slow\($0)"))" }))
        XCTAssertEqual(out.stderr, "downloadsctl: task \(ids[31]) failed: the server answered 404 Not Found\n")
        for index in 0..<30 {
            XCTAssertEqual(sha256(ofFile: directory.file("slow\(index)")), Self.sha256(Self.content(200_000, seed: 9)))
        }

        // The ids of the tasks in a state, one a line, are what cancel takes: the list cleared of
        // the finished ones, the failed one kept.
        let failedIDs = try await ctl(["list", "-q", "--state", "failed"])
        XCTAssertEqual(failedIDs.stdout, ids[31] + "\n", failedIDs.description)
        let finishedIDs = try await ctl(["list", "--quiet", "--state", "finished", "--state", "cancelled"])
        XCTAssertEqual(lines(finishedIDs.stdout), Array(ids[0..<31]), finishedIDs.description)
        let removed = try await ctl(["cancel"] + lines(finishedIDs.stdout))
        XCTAssertEqual(removed.status, 0, removed.description)
        XCTAssertEqual(lines(removed.stdout).count, 31)
        let left = try await ctl(["list", "-q"])
        XCTAssertEqual(left.stdout, ids[31] + "\n")
        let bad = try await ctl(["list", "--state", "done"])
        XCTAssertEqual(bad.status, 64)
        XCTAssertTrue(bad.stderr.contains("--state done is not a state"), bad.stderr)
    }

    /// `watch` into a pipe: a line per change, a running task with the speed measured between two
    /// looks (never the `0 B/s` it printed for every task before), an ended one without a speed
    /// and a failed one with its reason; on a terminal a table with SPEED and ETA columns.
    func testWatchShowsTheSpeedOfRunningTasks() async throws {
        var route = Route(content: Self.content(4_000_000))
        route.bytesPerSecond = 400_000
        http.set("/slow", route)
        http.set("/small", Route(content: Self.content(1_000)))
        var gone = Route(content: [])
        gone.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/gone", gone)
        let small = try await start(http.url("/small"), directory.file("small"))
        _ = try await waitState(small, ["finished"])
        _ = try await waitState(try await start(http.url("/gone"), directory.file("gone")), ["failed"])
        let slow = try await start(http.url("/slow"), directory.file("slow"))
        try await waitBytes(slow, atLeast: 1)
        let id = DownloadsAPI.taskID(slow).map(String.init) ?? ""

        let piped = try ChildProcess([Self.ctl, "--address", bus.address, "watch"])
        let pipedOutput = OutputCollector(piped.stdout)
        let measured = try Regex("task \(id) running [0-9]+% [0-9.]+ [KM]iB of 3.8 MiB, [0-9.]+ KiB/s")
        try await until("watch prints the running task's speed") { pipedOutput.text.contains(measured) }
        piped.signal(SIGINT)
        XCTAssertEqual(piped.wait(), 0)
        let lines = lines(await pipedOutput.finish())
        XCTAssertTrue(lines.contains("task 1 finished 100% 1000 B of 1000 B"), "\(lines)")
        XCTAssertTrue(lines.contains("task 2 failed 0 B: the server answered 404 Not Found"), "\(lines)")
        XCTAssertFalse(lines.contains { $0.contains(" 0 B/s") }, "\(lines)")

        let command = [Self.ctl, "--address", bus.address, "watch"].map { "'\($0)'" }.joined(separator: " ")
        let terminal = try ChildProcess(["script", "-qefc", command, "/dev/null"])
        defer { terminal.stop() }
        let screen = OutputCollector(terminal.stdout)
        let row = try Regex("\(id) +running +[0-9]+% +[0-9.]+ KiB/s +[0-9]+:[0-9]{2} +default")
        try await until("watch draws the speed and the time left") {
            screen.text.contains("ID  STATE     PROGRESS  SPEED") && screen.text.contains(row)
        }
    }

    func testCtrlCPausesEveryStartedDownloadOfAList() async throws {
        var route = Route(content: Self.content(3_000_000))
        route.bytesPerSecond = 300_000
        http.set("/one", route)
        http.set("/two", route)
        let into = directory.file("slow")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)
        let child = try ChildProcess([
            Self.ctl, "--address", bus.address, "get", http.url("/one"), http.url("/two"), "-o", into,
        ])
        try await waitBytes(ObjectPath("/org/example/Downloads/tasks/1"), atLeast: 50_000)
        try await waitBytes(ObjectPath("/org/example/Downloads/tasks/2"), atLeast: 50_000)
        child.signal(SIGINT)
        let status = child.wait()
        let stderr = String(decoding: child.stderr.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(status, 130, stderr)
        XCTAssertEqual(stderr, "paused tasks 1 2; resume them with: downloadsctl --address \(bus.address) resume 1 2\n")
        for id in [1, 2] {
            let state = try await property(ObjectPath("/org/example/Downloads/tasks/\(id)"), "State")?.stringValue
            XCTAssertEqual(state, "paused", "task \(id)")
        }

        // The command it suggests resumes both; pause and cancel take several tasks too, and a
        // missing one among them is its own line on standard error while the others go on.
        let resumed = try await ctl(["resume", "1", "2"])
        XCTAssertEqual(resumed.status, 0, resumed.description)
        XCTAssertEqual(resumed.stdout, "resumed task 1\nresumed task 2\n")
        let paused = try await ctl(["pause", "2", "1"])
        XCTAssertEqual(paused.stdout, "paused task 2\npaused task 1\n", paused.description)
        let refused = try await ctl(["pause", "1", "2", "--resume-data", directory.file("r")])
        XCTAssertEqual(refused.status, 64, refused.description)
        let cancelled = try await ctl(["cancel", "1", "99", "2"])
        XCTAssertEqual(cancelled.status, 1, cancelled.description)
        XCTAssertEqual(cancelled.stdout, "cancelled task 1\ncancelled task 2\n")
        XCTAssertEqual(cancelled.stderr, "downloadsctl: no task at /org/example/Downloads/tasks/99\n")
        for id in [1, 2] {
            let state = try await property(ObjectPath("/org/example/Downloads/tasks/\(id)"), "State")?.stringValue
            XCTAssertEqual(state, "cancelled", "task \(id)")
        }
    }

    func testErrorsAreOneLineAndAnExitStatus() async throws {
        let ftp = try await ctl(["get", "ftp://127.0.0.1/x", "-o", directory.file("x")])
        XCTAssertEqual(ftp.status, 1)
        XCTAssertEqual(ftp.stderr, "downloadsctl: only http and https URLs can be downloaded, not 'ftp'\n")
        let verbose = try await ctl(["--verbose", "status", "999"])
        XCTAssertEqual(verbose.status, 1)
        XCTAssertEqual(
            verbose.stderr,
            "downloadsctl: no task at /org/example/Downloads/tasks/999 (org.example.Downloads.Error.NotFound)\n")
        var failing = Route(content: [])
        failing.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/gone", failing)
        let gone = try await ctl(["get", http.url("/gone"), "-o", directory.file("gone")])
        XCTAssertEqual(gone.status, 1)
        XCTAssertTrue(
            gone.stderr.hasPrefix("downloadsctl: download failed: the server answered 404 Not Found"), gone.stderr)
        XCTAssertEqual(
            lines(gone.stderr).count, 1, "no progress line for a download that never got a byte: \(gone.stderr)")
        let usage = try await ctl(["resume"])
        XCTAssertEqual(usage.status, 64, usage.description)
        stopDaemon()
        let down = try await ctl(["list"])
        XCTAssertEqual(down.status, 69, down.description)
        XCTAssertEqual(down.stderr, "downloadsctl: the download service is not running on this bus\n")
    }
}
