import DBus
import DownloadsClient
import NIOConcurrencyHelpers
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `downloadsd --system` as root on a private system-type bus with the shipped policy, and
/// user nobody as a second client.
final class SystemBusTests: SystemBusTestCase {
    func testServesOnTheSystemBusWithTheShippedPolicy() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to own the name under the shipped policy") }
        http.set("/s", Route(content: Self.content(10_000)))
        let path = try await start(http.url("/s"), directory.file("s.bin"))
        try await waitState(path, ["finished"])
        // Resume data of a task that is gone: ResumeWithData would make a new task.
        var slow = Route(content: Self.content(1_000_000))
        slow.bytesPerSecond = 500_000
        http.set("/slow", slow)
        let other = try await start(http.url("/slow"), directory.file("slow.bin"))
        try await waitBytes(other, atLeast: 50_000)
        let paused = try await call("Pause", [.objectPath(other)])
        let blob = try XCTUnwrap(paused.first?.bytesValue)
        _ = try await call("Cancel", [.objectPath(other)])
        _ = try await call("Cancel", [.objectPath(other)])
        let blobText = blob.map { String($0) }.joined(separator: ", ")
        XCTAssertEqual(sha256(ofFile: directory.file("s.bin")), Self.sha256(Self.content(10_000)))

        let nobody = try await asNobody(
            """
            import dbus, json
            bus = dbus.bus.BusConnection('\(bus.address)')
            out = {}
            try:
                bus.request_name('org.example.Downloads')
                out['own'] = 'allowed'
            except dbus.DBusException as e:
                out['own'] = e.get_dbus_name()
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            out['list'] = [str(p) for p in m.ListTasks('')]
            page = m.ListTasksPage('', dbus.UInt64(0), dbus.UInt32(100))
            out['page'] = [[str(p) for p in page[0]], int(page[1])]
            task = bus.get_object('org.example.Downloads', '\(path.rawValue)')
            for name, call in [('pause', lambda: m.Pause('\(path.rawValue)')),
                               ('get', lambda: task.Get('org.example.Downloads.Task', 'URL', dbus_interface='org.freedesktop.DBus.Properties')),
                               ('getall', lambda: task.GetAll('org.example.Downloads.Task', dbus_interface='org.freedesktop.DBus.Properties')),
                               ('managed', lambda: bus.get_object('org.example.Downloads', '/org/example/Downloads').GetManagedObjects(
                                   dbus_interface='org.freedesktop.DBus.ObjectManager')),
                               ('pause_missing', lambda: m.Pause('/org/example/Downloads/tasks/999999')),
                               ('introspect', lambda: task.Introspect(dbus_interface='org.freedesktop.DBus.Introspectable')),
                               ('introspect_missing', lambda: bus.get_object('org.example.Downloads', '/org/example/Downloads/tasks/999999')
                                   .Introspect(dbus_interface='org.freedesktop.DBus.Introspectable')),
                               ('start', lambda: m.Start('\(http.url("/s"))', '\(directory.file("x"))', dbus.Dictionary({}, signature='sv'))),
                               ('resume_with_data', lambda: m.ResumeWithData(dbus.ByteArray(bytes([\(blobText)])),
                                                                              dbus.Dictionary({}, signature='sv')))]:
                try:
                    call()
                    out[name] = 'allowed'
                except dbus.DBusException as e:
                    out[name] = e.get_dbus_name()
            tasks_xml = bus.get_object('org.example.Downloads', '/org/example/Downloads/tasks').Introspect(
                dbus_interface='org.freedesktop.DBus.Introspectable')
            out['children'] = tasks_xml.count('<node name=')
            print(json.dumps(out))
            """)
        XCTAssertEqual(nobody.status, 0, nobody.description)
        let result = try JSONSerialization.jsonObject(with: Data(nobody.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(
            result?["own"] as? String, "org.freedesktop.DBus.Error.AccessDenied", "only root may own the name")
        XCTAssertEqual(result?["list"] as? [String], [], "another user's tasks are not listed")
        let page = result?["page"] as? [Any]
        XCTAssertEqual((page?.first as? [Any])?.count, 0, "nor paged: \(String(describing: page))")
        XCTAssertEqual(page?.last as? Int, 0)
        // Another user's task does not exist for the caller: exactly a missing task's answer.
        XCTAssertEqual(result?["pause"] as? String, "org.example.Downloads.Error.NotFound")
        XCTAssertEqual(
            result?["get"] as? String, "org.example.Downloads.Error.NotFound", "another user's URL stays private")
        XCTAssertEqual(result?["getall"] as? String, "org.example.Downloads.Error.NotFound")
        XCTAssertEqual(result?["pause_missing"] as? String, result?["pause"] as? String, "a missing task answers alike")
        XCTAssertEqual(result?["introspect"] as? String, "org.freedesktop.DBus.Error.UnknownObject")
        XCTAssertEqual(result?["introspect_missing"] as? String, result?["introspect"] as? String)
        XCTAssertEqual(result?["children"] as? Int, 0, "Introspect of /tasks lists only the caller's tasks")
        XCTAssertEqual(
            result?["managed"] as? String, "org.freedesktop.DBus.Error.UnknownInterface",
            "no ObjectManager on the system bus: it would list every user's tasks")
        XCTAssertEqual(
            result?["start"] as? String, "org.example.Downloads.Error.FileError",
            "nobody cannot create files in root's private directory")
        XCTAssertEqual(
            result?["resume_with_data"] as? String, "org.example.Downloads.Error.InvalidResumeData",
            "another user's resume data is not theirs to use")
    }

    func testSignalsReachOnlyTheOwnersConnections() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to own the name under the shipped policy") }
        let ready = directory.file("listening")
        chmod(directory.path, 0o777)
        // nobody listens to every signal of the service, says when it is subscribed, and counts.
        let script = """
            import dbus, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.bus.BusConnection('\(bus.address)')
            seen = []
            bus.add_signal_receiver(lambda *a, **k: seen.append(k['member']), dbus_interface='org.example.Downloads',
                                    member_keyword='member')
            bus.add_signal_receiver(lambda *a, **k: seen.append('PropertiesChanged'),
                                    dbus_interface='org.freedesktop.DBus.Properties', path_keyword='path')
            bus.add_signal_receiver(lambda *a, **k: seen.append('ObjectManager'),
                                    dbus_interface='org.freedesktop.DBus.ObjectManager', path_keyword='path')
            bus.get_object('org.freedesktop.DBus', '/org/freedesktop/DBus').GetId(dbus_interface='org.freedesktop.DBus')
            open('\(ready)', 'w').write('ready')
            loop = GLib.MainLoop()
            GLib.timeout_add(3000, loop.quit)
            loop.run()
            print(len(seen))
            """
        let environment = bus.environment
        async let listener = ProcessRunner.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script],
            environment: environment
        )
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: ready) {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: ready), "the listener subscribed")
        let content = Self.content(300_000)
        http.set("/mine", Route(content: content))
        let path = try await start(http.url("/mine"), directory.file("mine.bin"))
        try await waitState(path, ["finished"])
        let heard = try await listener
        XCTAssertEqual(heard.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0", heard.description)
        XCTAssertFalse(signalNames(for: path).isEmpty, "the owner's own connection got them")
    }
}

extension SystemBusTests {
    /// `downloadsctl get -i` as user nobody on the system bus: the ends of its tasks reach it as
    /// signals sent to its own connection only, the files are nobody's (written by nobody's file
    /// helper), and `list` (no ObjectManager here) shows the one it kept.
    func testAListOfURLsAsAnotherUserOnTheSystemBus() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to own the name under the shipped policy") }
        chmod(directory.path, 0o755)
        let into = directory.file("nobody")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)
        chown(into, 65534, 65534)
        var contents: [String: [UInt8]] = [:]
        for index in 0..<12 {
            contents["n\(index).bin"] = Self.content(4_000 + index, seed: UInt32(index + 40))
            http.set("/n\(index).bin", Route(content: contents["n\(index).bin"] ?? []))
        }
        var gone = Route(content: [])
        gone.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/gone", gone)
        let list = directory.file("urls")
        try ((0..<12).map { http.url("/n\($0).bin") } + [http.url("/gone")]).joined(separator: "\n").write(
            toFile: list, atomically: true, encoding: .utf8)
        chmod(list, 0o644)
        let ctl = DownloadsctlTests.ctl
        let nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ctl, "--system"]
        let out = try await run(nobody + ["get", "-i", list, "-o", into], timeout: 120)
        XCTAssertEqual(out.status, 1, out.description)
        XCTAssertEqual(
            Set(out.stdout.split(separator: "\n").map(String.init)), Set(contents.keys.map { into + "/" + $0 }),
            out.description)
        for (name, content) in contents {
            XCTAssertEqual(sha256(ofFile: into + "/" + name), Self.sha256(content), name)
            var info = stat()
            XCTAssertEqual(stat(into + "/" + name, &info), 0)
            XCTAssertEqual(info.st_uid, 65534, "\(name) is nobody's")
        }
        XCTAssertTrue(
            out.stderr.contains("failed: \(http.url("/gone")): the server answered 404 Not Found (task "), out.stderr)
        let listed = try await run(nobody + ["list", "--json"])
        XCTAssertEqual(listed.status, 0, listed.description)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.compactMap { $0["url"] as? String }, [http.url("/gone")], listed.stdout)
    }

    /// Under the system bus's default policy (method calls denied), the shipped rule lets the
    /// service call the completion handler, and the call reaches the owner's connection.
    func testCompletionHandlerIsCalledOnTheSystemBus() async throws {
        let app = try CompletionHandlerTests.App(connection: try await Connection.open(.address(bus.address)))
        defer { app.connection.close() }
        try await app.register("sys") { try await self.call($0, $1) }
        http.set("/small", Route(content: Self.content(2000)))
        let task = try await start(http.url("/small"), directory.file("small"), ["session": .string("sys")])
        try await waitState(task, ["finished"])
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline && app.calls.withLockedValue({ $0 }).isEmpty {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(
            app.calls.withLockedValue { $0 }, ["sys"], (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "")
    }

    /// DownloadsClient on the system bus: signals there are unicast to connections the service
    /// has seen, so the session makes itself known before it relies on them, and its completion
    /// handler is called under the default-deny policy.
    func testDownloadSessionOnTheSystemBus() async throws {
        final class Recorder: DownloadSessionDelegate {
            let calls = NIOLockedValueBox([String]())
            func downloadSession(
                _ session: DownloadSession, downloadTask: BackgroundDownloadTask,
                didFinishDownloadingTo location: String
            ) {
                calls.withLockedValue { $0.append("finish") }
            }
            func downloadSessionDidFinishEvents(forBackgroundSession session: DownloadSession) {
                calls.withLockedValue { $0.append("events") }
            }
        }
        var configuration = DownloadSession.Configuration.background(identifier: "sysclient")
        configuration.bus = .address(bus.address)
        let recorder = Recorder()
        let session = try await DownloadSession(configuration: configuration, delegate: recorder)
        defer { session.invalidate() }
        http.set("/c", Route(content: Self.content(100_000)))
        let task = session.downloadTask(with: try XCTUnwrap(URL(string: http.url("/c"))), to: directory.file("c"))
        try await task.resume()
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline && !recorder.calls.withLockedValue({ $0.contains("events") }) {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(recorder.calls.withLockedValue { $0 }, ["finish", "events"], daemonLog)
    }
}
