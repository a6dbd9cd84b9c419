import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `StartGroupAt` from a Flatpak app: its names are relative paths below the directory it
/// opened; the subdirectories are made there, and nothing is made through `..`, an absolute
/// path or a link, whatever the link points at.
extension SandboxedAppTests {
    func testStartGroupAtMakesNestedNamesBelowTheDirectory() async throws {
        let app = try await launch("org.example.Player")
        let contents = (0..<3).map { Self.content(50_000 + $0 * 1000, seed: UInt32(20 + $0)) }
        for (index, content) in contents.enumerated() { http.set("/asset\(index)", Route(content: content)) }
        let names = ["readme.txt", "assets/img/logo.png", "assets/sound.ogg"]
        let reply = try await app.send([
            "op": "startgroupat", "dir": app.home + "/Downloads",
            "files": names.enumerated().map { [http.url("/asset\($0.offset)"), $0.element, [String: Any]()] as [Any] },
            "options": ["title": ["s", "the game's assets"], "atomic": ["b", true]],
        ])
        XCTAssertNil(reply.error, "\(reply)")
        let answer = try XCTUnwrap(reply.value as? [Any], "\(reply)")
        let group = try ObjectPath(XCTUnwrap(answer.first as? String))
        let tasks = try XCTUnwrap(answer.last as? [String]).map { try ObjectPath($0) }
        XCTAssertEqual(tasks.count, 3)
        try await until("the app hears GroupFinished") {
            let heard = try await app.send(["op": "signals"]).value as? [[String]] ?? []
            return heard.contains { $0[0] == "GroupFinished" && $0[1] == group.rawValue }
        }
        for (name, content) in zip(names, contents) {
            XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/" + name), Self.sha256(content), name)
        }
        for task in tasks {
            let app = try await property(task, "App")?.stringValue
            XCTAssertEqual(app, "org.example.Player", "the app owns its group's tasks")
        }
        var info = stat()
        XCTAssertEqual(stat(app.home + "/Downloads/assets/img", &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(info.st_mode & 0o700, 0o700, "the directory is the user's to use")
        // Another app does not see the group.
        let other = try await launch("org.example.Snoop")
        let listed = try await other.send([
            "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads",
            "method": "ListGroups", "sig": "s", "args": [""],
        ])
        XCTAssertEqual(listed.value as? [String], [], "\(listed)")
        let read = try await other.send([
            "op": "call", "path": group.rawValue, "iface": "org.freedesktop.DBus.Properties",
            "method": "Get", "sig": "ss", "args": ["org.example.Downloads.Group", "Title"],
        ])
        XCTAssertNotNil(read.error, "another app reads the group: \(read)")
    }

    func testStartGroupAtRefusesParentsAbsolutePathsAndLinks() async throws {
        let app = try await launch("org.example.Player")
        http.set("/evil", Route(content: Array("[Desktop Entry]\nExec=owned\n".utf8)))
        // A link the app could make in its own directory, to a place outside its sandbox.
        XCTAssertEqual(symlink("../.config/autostart", app.home + "/Downloads/escape"), 0)
        XCTAssertEqual(symlink("../.bashrc", app.home + "/Downloads/rc"), 0)
        let cases: [(String, String)] = [
            ("../.config/autostart/evil.desktop", "org.example.Downloads.Error.InvalidArgument"),
            ("assets/../../.bashrc", "org.example.Downloads.Error.InvalidArgument"),
            ("/home/user/.config/autostart/evil.desktop", "org.example.Downloads.Error.InvalidArgument"),
            (app.home + "/.bashrc", "org.example.Downloads.Error.InvalidArgument"),
            ("assets//x", "org.example.Downloads.Error.InvalidArgument"),
            ("escape/evil.desktop", "org.example.Downloads.Error.FileError"),
            ("escape/deeper/evil.desktop", "org.example.Downloads.Error.FileError"),
        ]
        for (name, expected) in cases {
            let reply = try await app.send([
                "op": "startgroupat", "dir": app.home + "/Downloads",
                "files": [
                    [http.url("/evil"), "fine.txt", [String: Any]()], [http.url("/evil"), name, [String: Any]()],
                ],
            ])
            XCTAssertEqual(reply.error, expected, "\(name): \(reply)")
            XCTAssertTrue(
                reply.message?.contains("file 1") == true || expected.hasSuffix("FileError"), "\(name): \(reply)")
        }
        // A link as the file's own name is replaced (renamed over), never written through.
        let overLink = try await app.send([
            "op": "startgroupat", "dir": app.home + "/Downloads",
            "files": [[http.url("/evil"), "rc", [String: Any]()]],
            "options": ["overwrite": ["b", true]],
        ])
        let task = try ObjectPath(XCTUnwrap((overLink.value as? [Any])?.last as? [String], "\(overLink)").first ?? "")
        _ = try await waitState(task, ["finished"])
        XCTAssertEqual(
            try String(contentsOfFile: app.home + "/Downloads/rc", encoding: .utf8), "[Desktop Entry]\nExec=owned\n")
        XCTAssertEqual(try String(contentsOfFile: app.home + "/.bashrc", encoding: .utf8), "# the user's own\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/.config/autostart"), [])
        let made = try FileManager.default.contentsOfDirectory(atPath: app.home + "/Downloads").sorted()
        XCTAssertEqual(made, ["escape", "rc"], "a refused group starts nothing")
        // A group is no way around the app's share of tasks (3 here).
        let many = try await app.send([
            "op": "startgroupat", "dir": app.home + "/Downloads",
            "files": (0..<4).map { [http.url("/evil"), "many/\($0)", [String: Any]()] as [Any] },
        ])
        XCTAssertEqual(many.error, "org.example.Downloads.Error.QuotaExceeded", "\(many)")
        // And a path-named group is refused to a sandboxed app, pointing at StartGroupAt.
        let byPath = try await app.send([
            "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads", "method": "StartGroup",
            "sig": "a(ssa{sv})a{sv}",
            "args": [[[http.url("/evil"), app.home + "/.bashrc", [String: Any]()]], [String: Any]()],
        ])
        XCTAssertEqual(byPath.error, "org.example.Downloads.Error.AccessDenied", "\(byPath)")
        XCTAssertTrue(byPath.message?.contains("StartGroupAt") == true, "\(byPath)")
    }

    /// A sandboxed app's group paused, the daemon killed: its resume data and the directory opened
    /// again carry the same group on below the new descriptor; another app's call with the data
    /// is refused.
    func testAGroupsResumeDataCarriesItOnBelowANewDescriptor() async throws {
        let app = try await launch("org.example.Player")
        let contents = (0..<2).map { Self.content(1_500_000, seed: UInt32(40 + $0)) }
        for (index, content) in contents.enumerated() { http.set("/lvl\(index)", Self.slow(content, 300_000)) }
        let names = ["level/a.bin", "level/b.bin"]
        let reply = try await app.send([
            "op": "startgroupat", "dir": app.home + "/Downloads",
            "files": names.enumerated().map { [http.url("/lvl\($0.offset)"), $0.element, [String: Any]()] as [Any] },
        ])
        let answer = try XCTUnwrap(reply.value as? [Any], "\(reply)")
        let group = try ObjectPath(XCTUnwrap(answer.first as? String))
        let tasks = try XCTUnwrap(answer.last as? [String]).map { try ObjectPath($0) }
        for task in tasks { try await waitBytes(task, atLeast: 1) }
        let paused = try await app.send([
            "op": "call", "path": group.rawValue, "iface": "org.example.Downloads.Group", "method": "Pause", "sig": "",
            "args": [Any](),
        ])
        let blob = try XCTUnwrap(paused.value as? String, "\(paused)")
        for task in tasks { _ = try await waitState(task, ["paused"]) }
        killDaemon()
        try await startDaemon()
        let other = try await launch("org.example.Snoop")
        let stolen = try await other.send(["op": "resumegroup", "blob": blob])
        XCTAssertEqual(stolen.error, "org.example.Downloads.Error.InvalidResumeData", "\(stolen)")
        let resumed = try await app.send(["op": "resumegroup", "blob": blob, "dir": app.home + "/Downloads"])
        XCTAssertEqual((resumed.value as? [Any])?.first as? String, group.rawValue, "\(resumed)")
        for task in tasks { _ = try await waitState(task, ["finished"]) }
        for (name, content) in zip(names, contents) {
            XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/" + name), Self.sha256(content), name)
        }
    }
}
