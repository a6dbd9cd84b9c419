import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Two Flatpak apps as Flatpak runs them (`FlatpakApp`: xdg-dbus-proxy and bubblewrap) against
/// the daemon on a private session bus: each reaches only its own tasks and only the files it
/// was given by descriptor; the host (`downloadsctl`, this test's own connection) sees both.
final class SandboxedAppTests: DaemonTestCase {
    var apps: [FlatpakApp] = []
    override var extraArguments: [String] { ["--max-tasks-per-app", "3"] }

    override func tearDown() async throws {
        for app in apps { app.stop() }
        try await super.tearDown()
    }

    func launch(_ id: String) async throws -> FlatpakApp {
        let app = try await FlatpakApp(
            id: id, busAddress: bus.address, busDirectory: bus.directory.path, directory: directory
        )
        apps.append(app)
        return app
    }

    static func slow(_ content: [UInt8], _ bytesPerSecond: Int) -> Route {
        var route = Route(content: content)
        route.bytesPerSecond = bytesPerSecond
        return route
    }

    func path(_ reply: FlatpakApp.Reply, file: StaticString = #filePath, line: UInt = #line) throws -> ObjectPath {
        XCTAssertNil(reply.error, "\(reply)", file: file, line: line)
        return try ObjectPath(XCTUnwrap(reply.value as? String, "\(reply)", file: file, line: line))
    }

    func testAPathDestinationIsRefusedAndNothingIsWritten() async throws {
        let app = try await launch("org.example.Player")
        http.set("/payload", Route(content: Array("echo owned\n".utf8)))
        for destination in [
            app.home + "/.bashrc", app.home + "/.config/autostart/x.desktop", app.home + "/Downloads/ok.bin",
        ] {
            let reply = try await app.send([
                "op": "start", "url": http.url("/payload"), "dest": destination, "options": ["overwrite": ["b", true]],
            ])
            XCTAssertEqual(reply.error, "org.example.Downloads.Error.AccessDenied", "\(destination): \(reply)")
            XCTAssertTrue(reply.message?.contains("StartAt") == true, "the message says what to do instead: \(reply)")
        }
        XCTAssertEqual(try String(contentsOfFile: app.home + "/.bashrc", encoding: .utf8), "# the user's own\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/.config/autostart"), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/Downloads"), [])
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertEqual(listed, [.objectPaths([])], "nothing was started")
    }

    func testStartAtTheDownloadsDirectoryFinishesWithTheRightBytes() async throws {
        let app = try await launch("org.example.Player")
        // The host's connection calls first: a task's signals go to the connections of its user
        // that have called, and a 300 kB download may end before the host's first call else.
        _ = try await call("ListTasks", [.string("")])
        let content = Self.content(300_000)
        http.set("/song.ogg", Route(content: content))
        let task = try path(
            await app.send([
                "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "song.ogg",
            ]))
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/song.ogg"), Self.sha256(content))
        let appID = try await property(task, "App")?.stringValue
        let entry = try await property(task, "DesktopEntry")?.stringValue
        let destination = try await property(task, "Destination")?.stringValue
        let session = try await property(task, "Session")?.stringValue
        XCTAssertEqual(appID, "org.example.Player")
        XCTAssertEqual(entry, "org.example.Player.desktop", "its own, unasked")
        XCTAssertEqual(destination, app.home + "/Downloads/song.ogg")
        XCTAssertEqual(session, "default", "the app's session as it named it")
        // The app reads its own task, and heard its own signals.
        let state = try await app.send(["op": "get", "path": task.rawValue, "prop": "State"])
        XCTAssertEqual(state.value as? String, "finished")
        try await until("the app hears its Finished, and its session's EventsFinished") {
            let heard = try await app.send(["op": "signals"]).value as? [[String]] ?? []
            return heard.contains { $0[0] == "Finished" && $0[1] == task.rawValue }
                && heard.contains { $0 == ["EventsFinished", "default", "/org/example/Downloads"] }
        }
        // The host's connection (this test's, which has called) heard the task's signals but not
        // the app's session ending: "default" would read as a session of its own. (The host's
        // copy of Finished may come a moment after the app's: waited for, bounded.)
        try await until("the host hears the task's Finished") { signalNames(for: task).contains("Finished") }
        XCTAssertFalse(
            signals.withLockedValue { $0 }.contains { $0.0 == "EventsFinished" },
            "an app's EventsFinished reached the host")
        // "" takes the server's name in the directory.
        http.set("/named", Route(content: content))
        let named = try path(
            await app.send(["op": "startat", "url": http.url("/named"), "dir": app.home + "/Downloads", "name": ""]))
        try await waitState(named, ["finished"])
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/named"), Self.sha256(content))
    }

    func testAReadOnlyDirectoryGivesFileErrorAndNothing() async throws {
        let app = try await launch("org.example.Player")
        http.set("/song.ogg", Route(content: Self.content(1000)))
        let reply = try await app.send([
            "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Music", "name": "song.ogg",
        ])
        XCTAssertEqual(reply.error, "org.example.Downloads.Error.FileError", "\(reply)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/Music"), [])
        // A name that is not one component is refused before anything is tried.
        let nested = try await app.send([
            "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "../x",
        ])
        XCTAssertEqual(nested.error, "org.example.Downloads.Error.InvalidArgument", "\(nested)")
    }

    func testAFileOpenedForWritingIsWrittenInPlace() async throws {
        let app = try await launch("org.example.Player")
        let content = Self.content(200_000, seed: 3)
        http.set("/doc", Route(content: content))
        let task = try path(
            await app.send(["op": "startfile", "url": http.url("/doc"), "file": app.home + "/Downloads/chosen.pdf"]))
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/chosen.pdf"), Self.sha256(content))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: app.home + "/Downloads"), ["chosen.pdf"],
            "no partial file beside it")
    }

    func testAnotherAppCannotSeeReadControlOrResumeATask() async throws {
        let a = try await launch("org.example.Player")
        let b = try await launch("org.example.Snoop")
        let content = Self.content(2_000_000, seed: 5)
        http.set("/slow", Self.slow(content, 200_000))
        let task = try path(
            await a.send([
                "op": "startat", "url": http.url("/slow"), "dir": a.home + "/Downloads", "name": "big.bin",
                "options": ["title": ["s", "secret title"]],
            ]))
        try await waitBytes(task, atLeast: 1)
        // B: the task does not exist.
        for (iface, method, sig, args) in [
            ("org.freedesktop.DBus.Properties", "Get", "ss", ["org.example.Downloads.Task", "URL"]),
            ("org.example.Downloads.Task", "Pause", "", []),
            ("org.example.Downloads.Task", "Cancel", "", []),
            ("org.example.Downloads.Task", "GetMetrics", "", []),
        ] as [(String, String, String, [String])] {
            let reply = try await b.send([
                "op": "call", "path": task.rawValue, "iface": iface, "method": method, "sig": sig, "args": args,
            ])
            XCTAssertNotNil(reply.error, "\(method) by another app: \(reply)")
            XCTAssertTrue(
                ["org.example.Downloads.Error.NotFound", "org.freedesktop.DBus.Error.UnknownObject"].contains(
                    reply.error ?? ""),
                "\(method) answers as for a missing task: \(reply)")
        }
        for method in ["Pause", "Cancel"] {
            let reply = try await b.send([
                "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads", "method": method,
                "sig": "o",
                "args": [task.rawValue],
            ])
            XCTAssertEqual(
                reply.error, "org.example.Downloads.Error.NotFound", "\(method) through the manager: \(reply)")
        }
        let listed = try await b.send([
            "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads",
            "method": "ListTasks", "sig": "s", "args": [""],
        ])
        XCTAssertEqual(listed.value as? [String], [], "another app lists nothing")
        let paged = try await b.send([
            "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads",
            "method": "ListTasksPage", "sig": "stu", "args": ["", 0, 100],
        ])
        let page = paged.value as? [Any]
        XCTAssertEqual((page?.first as? [Any])?.count, 0, "nor pages: \(paged)")
        XCTAssertEqual(page?.last as? Int, 0)
        // A pauses and gets resume data; B's ResumeWithData of it is refused.
        let paused = try await a.send([
            "op": "call", "path": task.rawValue, "iface": "org.example.Downloads.Task", "method": "Pause",
        ])
        let blob = try XCTUnwrap(paused.value as? String, "\(paused)")
        let stolen = try await b.send(["op": "resume", "blob": blob])
        XCTAssertEqual(stolen.error, "org.example.Downloads.Error.InvalidResumeData", "\(stolen)")
        let resumed = try await a.send(["op": "resume", "blob": blob])
        XCTAssertEqual(resumed.value as? String, task.rawValue, "the owner resumes its own: \(resumed)")
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: a.home + "/Downloads/big.bin"), Self.sha256(content))
        // B heard nothing of A's task; A heard its own; the host heard it too.
        try await until("A hears its Finished") {
            let heard = try await a.send(["op": "signals"]).value as? [[String]] ?? []
            return heard.contains { $0[0] == "Finished" && $0[1] == task.rawValue }
        }
        let heardByB = try await b.send(["op": "signals"]).value as? [[String]] ?? []
        XCTAssertFalse(
            heardByB.contains { $0[1] == task.rawValue || $0[2] == task.rawValue }, "B heard A's task: \(heardByB)")
        try await until("a host connection of the user hears it") { signalNames(for: task).contains("Finished") }
    }

    /// Two apps register an object for the same session name: a login one app's task meets is
    /// asked of that app's object alone, through its proxy, and its answer is the one used.
    func testAnAppsChallengeIsAskedOfItsOwnObjectAloneThroughTheSandbox() async throws {
        let player = try await launch("org.example.Player")
        let snoop = try await launch("org.example.Snoop")
        let content = Self.content(300_000, seed: 9)
        var route = Route(content: content)
        route.requiredAuthorization = "Basic " + Data("amy:pw-Player-7".utf8).base64EncodedString()
        http.set("/private", route)
        for (app, answer) in [
            (snoop, ["user": "snoop", "password": "stolen"]), (player, ["user": "amy", "password": "pw-Player-7"]),
        ] {
            let registered = try await app.send([
                "op": "agent", "session": "media", "challenges": ["http-auth"], "answer": answer,
            ])
            XCTAssertNil(registered.error, "\(registered)")
        }
        let task = try path(
            await player.send([
                "op": "startat", "url": http.url("/private"), "dir": player.home + "/Downloads", "name": "p.bin",
                "options": ["session": ["s", "media"]],
            ]))
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: player.home + "/Downloads/p.bin"), Self.sha256(content))
        let askedPlayer = try await player.send(["op": "asked"]).value as? [[String]] ?? []
        XCTAssertEqual(askedPlayer.map { $0[0] }, [task.rawValue])
        XCTAssertEqual(askedPlayer.first?[1], "http-auth")
        let askedSnoop = try await snoop.send(["op": "asked"]).value as? [[String]] ?? []
        XCTAssertEqual(askedSnoop.count, 0, "another app's object was asked: \(askedSnoop)")
        XCTAssertEqual(http.requests(for: "/private").map(\.status), [401, 200])
        // The host's session of the same name is the host's: its object is asked, no app's.
        let host = try ChallengeTests.Agent(connection: try await Connection.open(.address(bus.address))) { _ in
            ChallengeTests.use(["user": .string("amy"), "password": .string("pw-Player-7")])
        }
        defer { host.connection.close() }
        _ = try await host.connection.call(
            destination: "org.example.Downloads", path: "/org/example/Downloads", interface: "org.example.Downloads",
            method: "RegisterCompletionHandler",
            arguments: [
                .string("media"), .objectPath("/app"), .vardict(["challenges": .strings(["http-auth"])]),
            ])
        let hostTask = try await start(
            http.url("/private"), directory.file("host.bin"), ["session": .string("media")])
        try await waitState(hostTask, ["finished"])
        XCTAssertEqual(host.questions.map(\.task), [hostTask.rawValue])
        let askedAfter = try await snoop.send(["op": "asked"]).value as? [[String]] ?? []
        XCTAssertEqual(askedAfter.count, 0, "an app was asked about the host's task: \(askedAfter)")
    }

    func testTheHostSeesEveryAppsTasksWithTheirApp() async throws {
        let a = try await launch("org.example.Player")
        let b = try await launch("org.example.Maps")
        http.set("/x", Route(content: Self.content(1000)))
        let first = try path(
            await a.send(["op": "startat", "url": http.url("/x"), "dir": a.home + "/Downloads", "name": "x"]))
        let second = try path(
            await b.send(["op": "startat", "url": http.url("/x"), "dir": b.home + "/Downloads", "name": "x"]))
        try await waitState(first, ["finished"])
        try await waitState(second, ["finished"])
        let listed = try await run([
            PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "list", "--json",
        ])
        XCTAssertEqual(listed.status, 0, listed.description)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(Set(rows.compactMap { $0["app"] as? String }), ["org.example.Player", "org.example.Maps"])
        let table = try await run([PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "list"])
        XCTAssertTrue(table.stdout.contains("APP") && table.stdout.contains("org.example.Maps"), table.stdout)
    }

    func testNamesAreTheAppsOwn() async throws {
        let app = try await launch("org.example.Player")
        http.set("/x", Route(content: Self.content(1000)))
        let borrowed = try await app.send([
            "op": "startat", "url": http.url("/x"), "dir": app.home + "/Downloads", "name": "x",
            "options": ["desktop_entry": ["s", "org.gnome.Epiphany.desktop"]],
        ])
        XCTAssertEqual(borrowed.error, "org.example.Downloads.Error.InvalidArgument", "\(borrowed)")
        let own = try await app.send([
            "op": "startat", "url": http.url("/x"), "dir": app.home + "/Downloads", "name": "x",
            "options": ["desktop_entry": ["s", "org.example.Player.desktop"]],
        ])
        XCTAssertNil(own.error, "\(own)")
        let handler = try await app.send([
            "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads",
            "method": "RegisterCompletionHandler",
            "sig": "soa{sv}", "args": ["default", "/app", ["bus_name": "org.gnome.Epiphany"]],
        ])
        XCTAssertEqual(handler.error, "org.example.Downloads.Error.AccessDenied", "\(handler)")
        let plain = try await app.send([
            "op": "call", "path": "/org/example/Downloads", "iface": "org.example.Downloads",
            "method": "RegisterCompletionHandler",
            "sig": "soa{sv}", "args": ["default", "/app", [String: String]()],
        ])
        XCTAssertNil(plain.error, "its own connection may register: \(plain)")
    }

    /// kill -9 of the daemon mid-download: the restarted daemon has no descriptor, finds the
    /// partial file the descriptor created by its recorded path and inode, and finishes.
    func testKilledMidDownloadTheTaskFinishesAfterTheRestart() async throws {
        let app = try await launch("org.example.Player")
        let content = Self.content(3_000_000, seed: 9)
        http.set("/slow", Self.slow(content, 500_000))
        let task = try path(
            await app.send([
                "op": "startat", "url": http.url("/slow"), "dir": app.home + "/Downloads", "name": "big.bin",
            ]))
        try await waitBytes(task, atLeast: 1_200_000)
        killDaemon()
        try await startDaemon()
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/big.bin"), Self.sha256(content))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/Downloads"), ["big.bin"])
        // Still the app's own after the restart (its app was stored with it).
        let state = try await app.send(["op": "get", "path": task.rawValue, "prop": "State"])
        XCTAssertEqual(state.value as? String, "finished", "\(state)")
    }

    /// downloadsctl (DownloadsClient) inside the sandbox passes the destination's directory as a
    /// descriptor by itself: an app using the client needs no change.
    func testDownloadsctlInsideTheSandboxPassesADescriptor() async throws {
        let app = try await launch("org.example.Player")
        let content = Self.content(250_000, seed: 4)
        http.set("/ctl.bin", Route(content: content))
        let output = try await app.run([
            PackageRoot.debugBinary("downloadsctl"), "get", http.url("/ctl.bin"), "-o", app.home + "/Downloads/ctl.bin",
        ])
        XCTAssertEqual(output.status, 0, output.description)
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/ctl.bin"), Self.sha256(content))
        let listed = try await call("ListTasks", [.string("")])
        let task = try XCTUnwrap(listed.first?.objectPathArrayValue?.first)
        let owner = try await property(task, "App")?.stringValue
        XCTAssertEqual(owner, "org.example.Player")
    }

    /// A task that had not made its partial file when the daemon was killed cannot make one
    /// after the restart (the descriptor is gone): it fails saying so, and ResumeWithData of the
    /// app's resume data with the directory opened again carries it on.
    func testAfterARestartANewDescriptorCarriesATaskOn() async throws {
        let app = try await launch("org.example.Player")
        let content = Self.content(100_000, seed: 6)
        http.set("/later", Route(content: content))
        let begin = UInt64(Date().timeIntervalSince1970) + 3
        let task = try path(
            await app.send([
                "op": "startat", "url": http.url("/later"), "dir": app.home + "/Downloads", "name": "later.bin",
                "options": ["earliest_begin": ["t", begin]],
            ]))
        let paused = try await app.send([
            "op": "call", "path": task.rawValue, "iface": "org.example.Downloads.Task", "method": "Pause",
        ])
        let blob = try XCTUnwrap(paused.value as? String, "\(paused)")
        killDaemon()
        try await startDaemon()
        let resume = try await app.send([
            "op": "call", "path": task.rawValue, "iface": "org.example.Downloads.Task", "method": "Resume",
        ])
        XCTAssertNil(resume.error, "\(resume)")
        try await waitState(task, ["failed"])
        let message = try await property(task, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(message.contains("destination_fd"), message)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: app.home + "/Downloads"), [],
            "nothing made without the descriptor")
        let wrongPlace = try await app.send(["op": "resume", "blob": blob, "dir": app.home + "/Music"])
        XCTAssertEqual(
            wrongPlace.error, "org.example.Downloads.Error.FileError", "a read-only directory: \(wrongPlace)")
        let resumed = try await app.send(["op": "resume", "blob": blob, "dir": app.home + "/Downloads"])
        XCTAssertEqual(resumed.value as? String, task.rawValue, "\(resumed)")
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/later.bin"), Self.sha256(content))
    }

    /// One app cannot use up its user's tasks (`--max-tasks-per-app`, 3 here); the host still can.
    func testAnAppHasItsShareOfItsUsersTasks() async throws {
        let app = try await launch("org.example.Player")
        var route = Route(content: Self.content(1000))
        route.stallAfter = 0
        http.set("/stall", route)
        for index in 0..<3 {
            _ = try path(
                await app.send([
                    "op": "startat", "url": http.url("/stall"), "dir": app.home + "/Downloads", "name": "f\(index)",
                ]))
        }
        let fourth = try await app.send([
            "op": "startat", "url": http.url("/stall"), "dir": app.home + "/Downloads", "name": "f3",
        ])
        XCTAssertEqual(fourth.error, "org.example.Downloads.Error.QuotaExceeded", "\(fourth)")
        _ = try await start(http.url("/stall"), directory.file("host.bin"))
    }

    /// The service reads the proxy's /.flatpak-info: a link there (to a file only root may read)
    /// refuses every call of that app; it is never taken for the host.
    func testALinkAtTheSandboxesFlatpakInfoRefusesTheCall() async throws {
        let app = try await FlatpakApp(
            id: "org.example.Player", busAddress: bus.address, busDirectory: bus.directory.path, directory: directory,
            proxyInfo: ["--symlink", "/etc/shadow", "/.flatpak-info"]
        )
        apps.append(app)
        http.set("/x", Route(content: Self.content(100)))
        let reply = try await app.send(["op": "start", "url": http.url("/x"), "dest": app.home + "/Downloads/x"])
        XCTAssertEqual(reply.error, "org.example.Downloads.Error.AccessDenied", "\(reply)")
        XCTAssertTrue(reply.message?.contains("which app") == true, "\(reply)")
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertEqual(listed, [.objectPaths([])])
    }
}
