import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A server that wants to reach the person: names with terminal controls and bidi overrides,
/// names longer than the file system takes, markup and controls in a redirect. What lands on
/// disk, what `downloadsctl` and `downloads-monitor` print, and what a task's error says.
final class HostileServerTests: DaemonTestCase {
    static let ctl = PackageRoot.debugBinary("downloadsctl")
    static let monitor = PackageRoot.debugBinary("downloads-monitor")

    func ctl(_ arguments: [String], timeout: TimeInterval = 60) async throws -> ProcessRunner.Output {
        try await run([Self.ctl, "--address", bus.address] + arguments, timeout: timeout)
    }

    /// What a terminal must never receive from a server or caller: ESC, C1 controls, bidi overrides.
    func assertNothingHidden(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let hidden = text.unicodeScalars.filter {
            ($0.value < 32 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value)
        }
        XCTAssertTrue(
            hidden.isEmpty, "\(what) printed \(hidden.map { String($0.value, radix: 16) }): \(text)", file: file,
            line: line)
    }

    func downloadIntoDirectory(
        _ route: Route, path: String, directoryName: String
    ) async throws -> (ObjectPath, [String]) {
        http.set(path, route)
        let folder = directory.file(directoryName)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let task = try await start(http.url(path), folder)
        let state = try await waitState(task, ["finished", "failed"])
        XCTAssertEqual(state, "finished")
        return (task, try FileManager.default.contentsOfDirectory(atPath: folder))
    }

    func testNamesWithTerminalControlsAndBidiOverridesAreMadeHarmlessOnDisk() async throws {
        let content = Self.content(5000)
        var c1 = Route(content: content)
        c1.contentDisposition = "attachment; filename*=UTF-8''%C2%9B2J%C2%9D0%3Bpwned%C2%9Cevil.txt"
        let (_, c1Files) = try await downloadIntoDirectory(c1, path: "/c1", directoryName: "c1")
        XCTAssertEqual(c1Files, ["_2J_0;pwned_evil.txt"])

        var bidi = Route(content: content)
        bidi.contentDisposition = "attachment; filename*=UTF-8''invoice%E2%80%AEfdp.exe"
        let (_, bidiFiles) = try await downloadIntoDirectory(bidi, path: "/bidi", directoryName: "bidi")
        XCTAssertEqual(bidiFiles, ["invoice_fdp.exe"])

        // A redirect whose last path segment carries them.
        var redirect = Route(content: [])
        redirect.redirect = (302, "/files/%1B%5D0%3Bx%07%E2%80%AEgpj.sh")
        http.set("/files/\u{1B}]0;x\u{07}\u{202E}gpj.sh", Route(content: content))
        http.set("/files/%1B%5D0%3Bx%07%E2%80%AEgpj.sh", Route(content: content))
        let (_, redirected) = try await downloadIntoDirectory(redirect, path: "/go", directoryName: "redirected")
        XCTAssertEqual(redirected.count, 1)
        XCTAssertEqual(redirected.first, "_]0;x__gpj.sh")
        XCTAssertEqual(sha256(ofFile: directory.file("redirected/_]0;x__gpj.sh")), Self.sha256(content))
    }

    func testAServerNameAtNameMaxStillFindsAFreeNameAndKeepsItsExtension() async throws {
        let content = Self.content(3000)
        let stem = String(repeating: "n", count: 251)
        var route = Route(content: content)
        route.contentDisposition = "attachment; filename=\"\(stem).txt\""  // 255 bytes
        let folder = directory.file("long")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        http.set("/long", route)
        var finished: [String] = []
        for _ in 0..<2 {
            let task = try await start(http.url("/long"), folder)
            let state = try await waitState(task, ["finished", "failed"])
            let message = try await property(task, "ErrorMessage")?.stringValue ?? ""
            XCTAssertEqual(state, "finished", message)
            finished.append(try await property(task, "Destination")?.stringValue ?? "")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        XCTAssertEqual(names.count, 2, "\(names)")
        XCTAssertTrue(names.allSatisfy { $0.hasSuffix(".txt") && $0.utf8.count <= 255 }, "\(names)")
        XCTAssertTrue(names.contains { $0.hasSuffix(" (1).txt") }, "\(names)")
        XCTAssertFalse(names.contains { $0.hasSuffix(".part") })
        for name in names { XCTAssertEqual(sha256(ofFile: folder + "/" + name), Self.sha256(content)) }
    }

    func testWhatReachesATerminalIsEscaped() async throws {
        // The caller chose this destination; the server chose the redirect's Location.
        let hostile = "x\u{1B}[2J\u{9B}31m\u{202E}txt.sh"
        http.set("/plain", Route(content: Self.content(1000)))
        let finished = try await start(http.url("/plain"), directory.file(hostile))
        try await waitState(finished, ["finished"])
        var bad = Route(content: [])
        // (The test server cannot send ESC in a header; C1 CSI, a bidi override and markup it can.)
        bad.redirect = (
            302,
            "ht\u{9B}tp:// \u{202E}<a href=\"https://evil.example/\">Sign in to continue</a> & <img src=\"https://evil.example/t.png\"/>"
                + String(repeating: " padding", count: 40)
        )
        http.set("/bad", bad)
        let failed = try await start(http.url("/bad"), directory.file("bad.bin"))
        try await waitState(failed, ["failed"])
        let message = try await property(failed, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(message.hasPrefix("redirect to "), message)
        // The task's own message quotes the server's value shortened and escaped.
        assertNothingHidden(message, "ErrorMessage")
        XCTAssertLessThan(message.count, 200, message)

        let list = try await ctl(["list"])
        assertNothingHidden(list.stdout, "downloadsctl list")
        XCTAssertTrue(list.stdout.contains("x\\x1b[2J\\x9b31m\\u{202e}txt.sh"), list.stdout)
        for task in [finished, failed] {
            let status = try await ctl(["status", task.rawValue])
            assertNothingHidden(status.stdout, "downloadsctl status")
        }
        let wait = try await ctl(["wait", finished.rawValue])
        assertNothingHidden(wait.stdout, "downloadsctl wait")
        XCTAssertTrue(wait.stdout.contains("\\x1b[2J"), wait.stdout)

        // downloads-monitor, following a task to a hostile destination.
        let monitor = try ChildProcess([Self.monitor, "--address", bus.address])
        defer { monitor.stop() }
        let ready = await Task.detached { String(decoding: monitor.stderr.availableData, as: UTF8.self) }.value
        XCTAssertTrue(ready.contains("watching"), ready)
        let watched = try await start(http.url("/plain"), directory.file("w" + hostile))
        try await waitState(watched, ["finished"])
        let output = OutputCollector(monitor.stdout)
        try await until("downloads-monitor reports the task finished") {
            output.text.contains("task \(watched.rawValue.split(separator: "/").last ?? "") finished")
        }
        monitor.stop()
        let seen = await output.finish()
        assertNothingHidden(seen, "downloads-monitor")
        XCTAssertTrue(seen.contains("\\x1b[2J\\x9b31m\\u{202e}txt.sh"), seen)
    }

    func testGetOffersResumeOnlyWhereTryingAgainMayHelp() async throws {
        var missing = Route(content: [])
        missing.failFirst = (count: 100, status: 404, retryAfter: nil)
        http.set("/missing", missing)
        let notFound = try await ctl(["get", http.url("/missing"), "-o", directory.file("missing")])
        XCTAssertNotEqual(notFound.status, 0)
        XCTAssertTrue(notFound.stderr.contains("404"), notFound.stderr)
        XCTAssertFalse(notFound.stderr.contains("resume with"), notFound.stderr)

        var insecure = Route(content: [])
        insecure.redirect = (302, "ftp://example.invalid/x")
        http.set("/ftp", insecure)
        let refused = try await ctl(["get", http.url("/ftp"), "-o", directory.file("ftp")])
        XCTAssertFalse(refused.stderr.contains("resume with"), refused.stderr)

        var unavailable = Route(content: [])
        unavailable.failFirst = (count: 100, status: 503, retryAfter: "0")
        http.set("/busy", unavailable)
        let busy = try await ctl(["get", http.url("/busy"), "-o", directory.file("busy")], timeout: 120)
        XCTAssertTrue(busy.stderr.contains("503"), busy.stderr)
        XCTAssertTrue(busy.stderr.contains("resume with: downloadsctl --address \(bus.address) resume"), busy.stderr)
    }
}
