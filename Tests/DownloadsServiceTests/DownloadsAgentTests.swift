import DBus
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// downloads-agent between the daemon's bus and a second private bus that plays the desktop
/// session: python-dbusmock's `notification_daemon`, a dock listener (this test's own
/// connection) and a KDE job-view server written below in python3-dbus.
class DownloadsAgentTests: DaemonTestCase {
    static let agentBinary = PackageRoot.debugBinary("downloads-agent")

    var desktop: PrivateBus!
    var desktopClient: Connection!
    let dockUpdates = NIOLockedValueBox([(String, [String: DBusValue])]())
    var agent: ChildProcess?
    var children: [ChildProcess] = []

    override func setUp() async throws {
        try await super.setUp()
        desktop = try PrivateBus()
        desktopClient = try await Connection.open(.address(desktop.address))
        try await desktopClient.subscribe(MatchRule(interface: "com.canonical.Unity.LauncherEntry", member: "Update")) {
            [dockUpdates] message in
            guard let arguments = try? message.arguments(), arguments.count == 2, let uri = arguments[0].stringValue,
                let properties = arguments[1].vardictValue
            else { return }
            dockUpdates.withLockedValue { $0.append((uri, properties)) }
        }
        // The desktop's file opener, as a script that says what it was asked to open.
        let opener = directory.file("bin/xdg-open")
        try FileManager.default.createDirectory(atPath: directory.file("bin"), withIntermediateDirectories: true)
        try "#!/bin/sh\nprintf '%s' \"$1\" > \(directory.file("opened"))\n".write(
            toFile: opener, atomically: true, encoding: .utf8)
        chmod(opener, 0o755)
        // The desktop's app launcher, the same way.
        let launcher = directory.file("bin/gio")
        try "#!/bin/sh\nprintf '%s %s' \"$1\" \"$2\" > \(directory.file("launched"))\n".write(
            toFile: launcher, atomically: true, encoding: .utf8)
        chmod(launcher, 0o755)
    }

    override func tearDown() async throws {
        agent?.stop()
        for child in children { child.stop() }
        desktopClient?.close()
        desktop?.stop()
        try await super.tearDown()
    }

    /// How the agent finds the service.
    var agentBusArguments: [String] { ["--address", bus.address] }

    /// What the daemon is launched under (a test moves it into a `Bottleneck`'s namespace).
    var daemonLauncher: [String] = []
    override var launcher: [String] { daemonLauncher }

    var desktopEnvironment: [String: String] {
        [
            "DBUS_SESSION_BUS_ADDRESS": desktop.address, "DBUS_SYSTEM_BUS_ADDRESS": bus.address,
            "PATH": directory.file("bin") + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
            "XDG_DATA_HOME": directory.file("data"),
        ]
    }

    func startAgent() async throws {
        let log = agentLog
        agent = try ChildProcess(
            ["/bin/sh", "-c", "exec \"$0\" \"$@\" 2>>\(log)", Self.agentBinary] + agentBusArguments,
            environment: desktopEnvironment)
        try await until("the agent follows the service", log: log) {
            (try? String(contentsOfFile: log, encoding: .utf8))?.contains("following downloads") == true
        }
    }

    func startOnDesktop(_ arguments: [String], name: String) async throws -> ChildProcess {
        let child = try ChildProcess(arguments, environment: desktopEnvironment)
        children.append(child)
        try await until("\(name) on the desktop bus") { try await self.desktopClient.nameOwner(name) != nil }
        return child
    }

    func startNotificationDaemon() async throws {
        _ = try await startOnDesktop(
            [
                "/usr/bin/python3", "-m", "dbusmock", "--template", "notification_daemon", "-l",
                directory.file("notifications.log"),
            ],
            name: "org.freedesktop.Notifications")
    }

    var notificationLog: String {
        (try? String(contentsOfFile: directory.file("notifications.log"), encoding: .utf8)) ?? ""
    }

    var agentLog: String { directory.file("agent.log") }

    /// The user clicks `action` of notification `id` (python-dbusmock's server emits its
    /// `ActionInvoked`, as a real one does).
    func click(notification id: UInt32, action: String) async throws {
        let emitted = try await run([
            "busctl", "--address=\(desktop.address)", "call", "org.freedesktop.Notifications",
            "/org/freedesktop/Notifications", "org.freedesktop.DBus.Mock", "EmitSignal", "sssav",
            "org.freedesktop.Notifications", "ActionInvoked", "us", "2", "u", "\(id)", "s", action,
        ])
        XCTAssertEqual(emitted.status, 0, emitted.stderr)
    }

    // MARK: Without a job-view server: dock progress and notifications

    func testDockProgressAndNotificationsWithAnActionThatOpensTheFile() async throws {
        try await startNotificationDaemon()
        try await startAgent()
        // One agent per desktop session: a second one leaves quietly.
        let second = try await ProcessRunner.run(
            [Self.agentBinary] + agentBusArguments, environment: desktopEnvironment, timeout: 20)
        XCTAssertEqual(second.status, 0)
        XCTAssertTrue(second.stderr.contains("another downloads-agent runs in this session"), second.stderr)
        let content = Self.content(1_200_000, seed: 7)
        var slow = Route(content: content)
        slow.bytesPerSecond = 600_000
        http.set("/report.pdf", slow)
        let target = directory.file("report.pdf")
        let task = try await start(
            http.url("/report.pdf"), target, ["desktop_entry": .string("org.example.Test.desktop")])
        let entry = try await property(task, "DesktopEntry")?.stringValue
        XCTAssertEqual(entry, "org.example.Test.desktop")
        try await waitState(task, ["finished"], seconds: 30)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))

        let uri = "application://org.example.Test.desktop"
        try await until("the dock entry cleared", log: agentLog) {
            self.dockUpdates.withLockedValue { $0.last }.map {
                $0.0 == uri && $0.1["count-visible"]?.boolValue == false
            } ?? false
        }
        let updates = dockUpdates.withLockedValue { $0 }.filter { $0.0 == uri }
        let during = updates.filter { $0.1["progress-visible"]?.boolValue == true }
        XCTAssertFalse(during.isEmpty, "progress was shown on the dock")
        XCTAssertTrue(during.allSatisfy { $0.1["count"]?.int64Value == 1 })
        let progress = during.compactMap { $0.1["progress"]?.doubleValue }
        XCTAssertTrue(progress.contains { $0 > 0 && $0 < 1 }, "partial progress: \(progress)")
        XCTAssertEqual(progress, progress.sorted(), "progress only grows")

        try await until("the notification", log: agentLog) { self.notificationLog.contains("Download finished") }
        let finished = try XCTUnwrap(notificationLog.split(separator: "\n").first { $0.contains("Download finished") })
        XCTAssertTrue(finished.contains("\"report.pdf\""), String(finished))
        XCTAssertTrue(finished.contains("transfer.complete"), String(finished))
        XCTAssertTrue(finished.contains("\"desktop-entry\": \"org.example.Test\""), String(finished))
        XCTAssertTrue(finished.contains("[\"default\", \"Open\""), String(finished))

        // Clicking it opens the file with the desktop's opener.
        try await click(notification: 1, action: "default")
        try await until("xdg-open called", log: agentLog) {
            (try? String(contentsOfFile: self.directory.file("opened"), encoding: .utf8)) == target
        }

        // A failure notifies with the reason; the same task finishing later replaces it.
        http.set(
            "/later.bin",
            {
                var r = Route(content: content); r.failFirst = (count: 100, status: 404, retryAfter: nil); return r
            }())
        let later = try await start(http.url("/later.bin"), directory.file("later.bin"))
        try await waitState(later, ["failed"])
        try await until("the failure notification", log: agentLog) { self.notificationLog.contains("Download failed") }
        let failed = try XCTUnwrap(notificationLog.split(separator: "\n").first { $0.contains("Download failed") })
        XCTAssertTrue(failed.contains("transfer.error") && failed.contains("later.bin"), String(failed))
        http.set("/later.bin", Route(content: content))
        _ = try await client.call(
            destination: "org.example.Downloads", path: later, interface: "org.example.Downloads.Task", method: "Resume"
        )
        try await waitState(later, ["finished"])
        try await until("the replacing notification", log: agentLog) {
            self.notificationLog.split(separator: "\n").contains {
                $0.contains("Download finished") && $0.contains("\"later.bin\"")
            }
        }
        let replacing = try XCTUnwrap(
            notificationLog.split(separator: "\n").first {
                $0.contains("Download finished") && $0.contains("\"later.bin\"")
            })
        XCTAssertTrue(replacing.contains("Notify \"Downloads\" 2 "), "replaces notification 2: \(replacing)")
    }

    /// The body of a notification is markup to the notification server: a name or a message a
    /// server chose reaches it escaped (no link, no image, no broken markup from a bare `&`).
    func testNotificationsEscapeMarkupAndHiddenCharacters() async throws {
        try await startNotificationDaemon()
        try await startAgent()
        var named = Route(content: Self.content(2000))
        named.contentDisposition =
            "attachment; filename=\"<a href='https:__evil.example'>Open</a> & <img src='x'>.pdf\""
        http.set("/named", named)
        let folder = directory.file("named")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let task = try await start(http.url("/named"), folder)
        try await waitState(task, ["finished"])
        try await until("the notification", log: agentLog) { self.notificationLog.contains("Download finished") }
        let finished = try XCTUnwrap(notificationLog.split(separator: "\n").first { $0.contains("Download finished") })
        XCTAssertTrue(
            finished.contains("&lt;a href='https:__evil.example'&gt;Open&lt;_a&gt; &amp; &lt;img src='x'&gt;.pdf"),
            String(finished)
        )
        XCTAssertFalse(finished.contains("<a href") || finished.contains("<img"), String(finished))
    }

    /// The app's title names the download in the notification (escaped as markup), with its
    /// description on a line of its own; the file's name is shown only without a title.
    func testANotificationShowsTheTitleAndDescription() async throws {
        try await startNotificationDaemon()
        try await startAgent()
        http.set("/ep.mp3", Route(content: Self.content(2000, seed: 12)))
        let task = try await start(
            http.url("/ep.mp3"), directory.file("ep.mp3"),
            [
                "title": .string("Episode <42>"), "description": .string("Logs & locks"),
            ])
        try await waitState(task, ["finished"])
        try await until("the notification", log: agentLog) { self.notificationLog.contains("Download finished") }
        // The body's two lines: the log shows it as it came.
        let finished = try XCTUnwrap(
            notificationLog.range(of: "\"Download finished\"").map { notificationLog[$0.upperBound...] })
        XCTAssertTrue(finished.hasPrefix(" \"Episode &lt;42&gt;\nLogs &amp; locks\""), String(finished))
        XCTAssertFalse(finished.contains("ep.mp3"), "the title stands for the file name: \(finished)")
    }

    // MARK: With a job-view server (Plasma)

    static let jobViewServer = """
        import json, sys
        import dbus, dbus.service, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()
        log = open(sys.argv[1], 'a', buffering=1)
        def record(**entry):
            log.write(json.dumps(entry, default=str) + '\\n')
        class View(dbus.service.Object):
            def __init__(self, path):
                super().__init__(bus, path)
                self.path = path
            @dbus.service.method('org.kde.JobViewV3', in_signature='a{sv}')
            def update(self, properties):
                record(call='update', view=self.path, properties=dict(properties))
            @dbus.service.method('org.kde.JobViewV3', in_signature='usa{sv}')
            def terminate(self, code, message, hints):
                record(call='terminate', view=self.path, code=int(code), message=str(message))
            @dbus.service.signal('org.kde.JobViewV3')
            def cancelRequested(self): pass
            @dbus.service.signal('org.kde.JobViewV3')
            def suspendRequested(self): pass
            @dbus.service.signal('org.kde.JobViewV3')
            def resumeRequested(self): pass
        class Server(dbus.service.Object):
            def __init__(self, prefix):
                super().__init__(bus, '/JobViewServer')
                self.views, self.prefix = {}, prefix
            @dbus.service.method('org.kde.JobViewServerV2', in_signature='sia{sv}', out_signature='o')
            def requestView(self, entry, capabilities, hints):
                path = '/JobViewServer/%s_%d' % (self.prefix, len(self.views) + 1)
                self.views[path] = View(path)
                record(call='requestView', entry=str(entry), capabilities=int(capabilities), view=path)
                return dbus.ObjectPath(path)
            @dbus.service.method('org.example.Test', in_signature='os')
            def Emit(self, view, name):
                getattr(self.views[str(view)], name)()
        name = dbus.service.BusName('org.kde.JobViewServer', bus)
        server = Server(sys.argv[2])
        GLib.MainLoop().run()
        """

    private var jobViewCalls: [[String: Any]] {
        ((try? String(contentsOfFile: directory.file("jobviews.log"), encoding: .utf8)) ?? "").split(separator: "\n")
            .compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
    }

    private func startJobViewServer(_ prefix: String) async throws -> ChildProcess {
        try await startOnDesktop(
            ["/usr/bin/python3", "-c", Self.jobViewServer, directory.file("jobviews.log"), prefix],
            name: "org.kde.JobViewServer")
    }

    private func emitOnView(_ view: String, _ signal: String) async throws {
        let output = try await run([
            "busctl", "--address=\(desktop.address)", "call", "org.kde.JobViewServer", "/JobViewServer",
            "org.example.Test", "Emit", "os", view, signal,
        ])
        XCTAssertEqual(output.status, 0, output.stderr)
    }

    private func view(after count: Int = 0) async throws -> String {
        var found: String?
        try await until("a job view", log: agentLog) {
            found =
                self.jobViewCalls.filter { $0["call"] as? String == "requestView" }.dropFirst(count).first?["view"]
                as? String
            return found != nil
        }
        return try XCTUnwrap(found)
    }

    func testJobViewsShowTasksAndTheirRequestsReachTheService() async throws {
        try await startNotificationDaemon()
        let server = try await startJobViewServer("first")
        try await startAgent()
        let content = Self.content(3_000_000, seed: 9)
        var slow = Route(content: content)
        slow.bytesPerSecond = 300_000
        http.set("/big.iso", slow)
        let target = directory.file("big.iso")
        let task = try await start(http.url("/big.iso"), target, ["desktop_entry": .string("org.example.Test.desktop")])

        let first = try await view()
        let request = try XCTUnwrap(jobViewCalls.first { $0["call"] as? String == "requestView" })
        XCTAssertEqual(request["entry"] as? String, "org.example.Test")
        XCTAssertEqual(request["capabilities"] as? Int, 3, "cancel and suspend")
        try await until("progress in the view", log: agentLog) {
            self.jobViewCalls.contains {
                guard $0["call"] as? String == "update", $0["view"] as? String == first,
                    let properties = $0["properties"] as? [String: Any]
                else { return false }
                return (properties["processedBytes"] as? Int ?? 0) > 0 && properties["totalBytes"] as? Int == 3_000_000
                    && (properties["percent"] as? Int).map { $0 < 100 } == true
                    && properties["destUrl"] as? String == "file://" + target
            }
        }

        try await emitOnView(first, "suspendRequested")
        try await waitState(task, ["paused"])
        try await emitOnView(first, "resumeRequested")
        try await waitState(task, ["running"])

        // Plasma restarts: the running task gets a view from the new server.
        server.stop()
        _ = try await startJobViewServer("second")
        let second = try await view(after: 1)
        XCTAssertTrue(second.contains("second"), second)

        try await emitOnView(second, "cancelRequested")
        try await waitState(task, ["cancelled"])
        try await until("the view terminated", log: agentLog) {
            self.jobViewCalls.contains {
                $0["call"] as? String == "terminate" && $0["view"] as? String == second && $0["code"] as? Int == 1
            }
        }
        // The desktop shows job views and their ends: no notification, and no dock progress of
        // ours left (only while no server was there did the dock show it).
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertFalse(notificationLog.contains("Notify"), notificationLog)
        let lastDock = dockUpdates.withLockedValue { $0.last }
        XCTAssertTrue(
            lastDock.map { $0.1["count-visible"]?.boolValue == false } ?? true, "\(String(describing: lastDock))")
    }
    /// The daemon exits when idle (the agent, which only listens, keeps nothing and starts
    /// nothing) and comes back by activation at someone's call: the agent follows the new
    /// instance (it calls it once when its name appears, so its signals reach the agent again).
    func testTheAgentFollowsTheServiceAcrossAnIdleExitAndAnActivation() async throws {
        try switchToActivation(exitIdleTime: 1)
        try await startNotificationDaemon()
        try await startAgent()
        // Two seconds each: the agent learns of each task while it runs (it calls the instance
        // once its name appears), so the end is announced.
        var slow = Route(content: Self.content(600_000, seed: 2))
        slow.bytesPerSecond = 300_000
        http.set("/one.bin", slow)
        http.set("/two.bin", slow)
        let one = try await start(http.url("/one.bin"), directory.file("one.bin"))
        try await waitState(one, ["finished"])
        try await until("the first notification", log: agentLog) {
            self.notificationLog.split(separator: "\n").contains {
                $0.contains("Download finished") && $0.contains("\"one.bin\"")
            }
        }
        try await waitUntilTheDaemonExits()
        XCTAssertEqual(activations.count, 1)
        let two = try await start(http.url("/two.bin"), directory.file("two.bin"))
        try await waitState(two, ["finished"])
        try await until("the second notification, from the next instance", log: agentLog) {
            self.notificationLog.split(separator: "\n").contains {
                $0.contains("Download finished") && $0.contains("\"two.bin\"")
            }
        }
        XCTAssertEqual(activations.count, 2)
    }

    /// A group is one job view ("1 of 2 files"), its files none of their own; suspend and
    /// resume reach every file, and its end terminates the view.
    func testAGroupIsOneJobView() async throws {
        try await startNotificationDaemon()
        _ = try await startJobViewServer("group")
        try await startAgent()
        var slow = Route(content: Self.content(1_200_000, seed: 14))
        slow.bytesPerSecond = 400_000
        http.set("/asset1", Route(content: Self.content(20_000, seed: 15)))
        http.set("/asset2", slow)
        let reply = try await call(
            "StartGroup",
            [
                .array(
                    element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                    [
                        .structure([.string(http.url("/asset1")), .string(directory.file("asset1")), .vardict([:])]),
                        .structure([.string(http.url("/asset2")), .string(directory.file("asset2")), .vardict([:])]),
                    ]),
                .vardict(["title": .string("Level 3 assets")]),
            ])
        guard case .array(_, let paths) = reply[1] else { return XCTFail("\(reply)") }
        let tasks = paths.compactMap(\.objectPathValue)
        let view = try await view()
        try await until("the group's files in its view", log: agentLog) {
            self.jobViewCalls.contains {
                guard $0["call"] as? String == "update", $0["view"] as? String == view,
                    let properties = $0["properties"] as? [String: Any]
                else { return false }
                return properties["title"] as? String == "Downloading Level 3 assets"
                    && properties["descriptionValue1"] as? String == "1 of 2 files"
            }
        }
        try await emitOnView(view, "suspendRequested")
        try await waitState(tasks[1], ["paused"])
        try await emitOnView(view, "resumeRequested")
        try await until("the view terminated as finished", seconds: 30, log: agentLog) {
            self.jobViewCalls.contains {
                $0["call"] as? String == "terminate" && $0["view"] as? String == view && $0["code"] as? Int == 0
            }
        }
        XCTAssertEqual(
            jobViewCalls.filter { $0["call"] as? String == "requestView" }.count, 1,
            "one view for the group: \(jobViewCalls)")
        XCTAssertEqual(sha256(ofFile: directory.file("asset2")), Self.sha256(Self.content(1_200_000, seed: 14)))
    }

    /// A job view is titled with the app's title and shows its description.
    func testAJobViewShowsTheTitleAndDescription() async throws {
        try await startNotificationDaemon()
        _ = try await startJobViewServer("titled")
        try await startAgent()
        var slow = Route(content: Self.content(1_000_000, seed: 13))
        slow.bytesPerSecond = 200_000
        http.set("/titled.iso", slow)
        let task = try await start(
            http.url("/titled.iso"), directory.file("titled.iso"),
            [
                "desktop_entry": .string("org.example.Test.desktop"), "title": .string("Debian 13 netinst"),
                "description": .string("For the laptop"),
            ])
        let view = try await view()
        try await until("the title and description in the view", log: agentLog) {
            self.jobViewCalls.contains {
                guard $0["call"] as? String == "update", $0["view"] as? String == view,
                    let properties = $0["properties"] as? [String: Any]
                else { return false }
                return properties["title"] as? String == "Downloading Debian 13 netinst"
                    && properties["infoMessage"] as? String == "For the laptop"
            }
        }
        _ = try await call("Cancel", [.objectPath(task)])
    }

    /// An upload is "Uploading NAME" in its job view, from its file to its URL.
    func testAnUploadIsUploadingInItsJobView() async throws {
        try await startNotificationDaemon()
        _ = try await startJobViewServer("uploading")
        try await startAgent()
        http.set("/inbox", Route.receiving())
        let file = directory.file("report.pdf")
        try Data(Self.content(1_000_000, seed: 14)).write(to: URL(fileURLWithPath: file))
        let reply = try await call(
            "Upload",
            [
                .string(http.url("/inbox")), .string(file),
                .vardict([
                    "desktop_entry": .string("org.example.Test.desktop"), "max_bytes_per_second": .uint64(200_000),
                ]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        let view = try await view()
        try await until("an upload's view", log: agentLog) {
            self.jobViewCalls.contains {
                guard $0["call"] as? String == "update", $0["view"] as? String == view,
                    let properties = $0["properties"] as? [String: Any]
                else { return false }
                return properties["title"] as? String == "Uploading report.pdf"
                    && properties["descriptionValue1"] as? String == file
                    && properties["descriptionLabel2"] as? String == "To"
                    && properties["descriptionValue2"] as? String == self.http.url("/inbox")
            }
        }
        _ = try await call("Cancel", [.objectPath(task)])
    }

    /// An upload's end is "Upload finished", with nothing to open.
    func testAnUploadsNotificationSaysUploadFinished() async throws {
        try await startNotificationDaemon()
        try await startAgent()
        http.set("/inbox", Route.receiving())
        let file = directory.file("notes.txt")
        try Data(Self.content(2000, seed: 15)).write(to: URL(fileURLWithPath: file))
        let reply = try await call(
            "Upload", [.string(http.url("/inbox")), .string(file), .vardict(["title": .string("Meeting notes")])])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitState(task, ["finished"])
        try await until("the notification", log: agentLog) { self.notificationLog.contains("Upload finished") }
        let finished = try XCTUnwrap(
            notificationLog.range(of: "\"Upload finished\"").map { notificationLog[$0.upperBound...] })
        XCTAssertTrue(finished.hasPrefix(" \"Meeting notes\""), String(finished))
    }

    func testATaskWaitingForItsAppToSignInIsNotified() async throws {
        try await startNotificationDaemon()
        try await startAgent()
        var route = Route(content: Self.content(50_000, seed: 16))
        route.requiredAuthorization = "Basic " + Data("gus:pw".utf8).base64EncodedString()
        // The realm is the server's words: markup in it is shown as text.
        route.authenticate = #"Basic realm="<b>Bank & Co</b>""#
        http.set("/statement.pdf", route)
        let release = NIOLockedValueBox(false)
        let app = try ChallengeTests.Agent(connection: try await Connection.open(.address(bus.address))) { _ in
            while !release.withLockedValue({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
            return ChallengeTests.use(["user": .string("gus"), "password": .string("pw")])
        }
        defer { app.connection.close() }
        _ = try await app.connection.call(
            destination: "org.example.Downloads", path: "/org/example/Downloads", interface: "org.example.Downloads",
            method: "RegisterCompletionHandler",
            arguments: [
                .string("bank"), .objectPath("/app"),
                .vardict(["challenges": .array(element: .string, [.string("http-auth")])]),
            ])
        let task = try await start(
            http.url("/statement.pdf"), directory.file("statement.pdf"),
            ["session": .string("bank"), "desktop_entry": .string("org.example.Bank.desktop")])
        try await until("the sign-in notification", log: agentLog) {
            self.notificationLog.contains("Sign in to")
        }
        let asking = try XCTUnwrap(notificationLog.split(separator: "\n").first { $0.contains("Sign in to") })
        XCTAssertTrue(
            asking.contains("Sign in to &lt;b&gt;Bank &amp; Co&lt;/b&gt; to continue downloading statement.pdf"),
            String(asking))
        // What the agent read: the task's Question, while it waits for its app.
        let question = try await property(task, "Question")?.vardictValue ?? [:]
        XCTAssertEqual(question["kind"]?.stringValue, "http-auth")
        XCTAssertEqual(question["realm"]?.stringValue, "<b>Bank & Co</b>")
        XCTAssertEqual(question["host"]?.stringValue, "127.0.0.1")
        XCTAssertTrue(asking.contains("\"desktop-entry\": \"org.example.Bank\""), String(asking))
        XCTAssertTrue(asking.contains("[\"default\", \"Sign in\""), String(asking))
        // Its action starts the app, by its desktop file, where the user signs in.
        let applications = directory.file("data/applications")
        try FileManager.default.createDirectory(atPath: applications, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=Bank\nExec=true\n".write(
            toFile: applications + "/org.example.Bank.desktop", atomically: true, encoding: .utf8)
        try await click(notification: 1, action: "default")
        try await until("the app launched", log: agentLog) {
            (try? String(contentsOfFile: self.directory.file("launched"), encoding: .utf8))
                == "launch \(applications)/org.example.Bank.desktop"
        }
        release.withLockedValue { $0 = true }
        try await waitState(task, ["finished"])
    }

    /// A background task giving way shows in its job view: the agent reads `WaitingFor`.
    func testAJobViewSaysWhenABackgroundTaskGivesWay() async throws {
        let bottleneck: Bottleneck
        do {
            bottleneck = try Bottleneck()
        } catch let error as Bottleneck.Unavailable {
            throw XCTSkip("no network namespace with tbf here: \(error)")
        }
        defer { bottleneck.stop() }
        stopDaemon()
        daemonLauncher = bottleneck.prefix
        try await startDaemon()
        _ = try await startJobViewServer("background")
        try await startAgent()
        try bottleneck.file("long.bin", Self.content(40 << 20, seed: 41))
        try bottleneck.file("interactive.bin", Self.content(80 << 20, seed: 42))
        let task = try await start(
            bottleneck.url("long.bin"), directory.file("long.bin"), ["background": .boolean(true)])
        let view = try await view()
        try await waitBytes(task, atLeast: 2 << 20)
        let competitor = Task { try await bottleneck.curl("interactive.bin", seconds: 6) }
        try await until("the view says the task gives way", seconds: 8, log: agentLog) {
            self.jobViewCalls.contains {
                $0["call"] as? String == "update" && $0["view"] as? String == view
                    && ($0["properties"] as? [String: Any])?["infoMessage"] as? String
                        == "Giving way to other traffic (background download)"
            }
        }
        _ = try await competitor.value
        _ = try await call("Cancel", [.objectPath(task)])
    }

}

/// The same on the system bus under the shipped policy: the daemon sends the events of a task
/// only to its owner's connections that called it, which the agent does when it starts.
final class SystemBusAgentTests: DownloadsAgentTests {
    override var busArguments: [String] { ["--system"] }
    override func makeBus() throws -> PrivateBus { try SystemBusTestCase.makeSystemBus() }
    override var agentBusArguments: [String] { ["--system"] }

    // Declared again: test discovery on Linux finds only a class's own methods.
    override func testDockProgressAndNotificationsWithAnActionThatOpensTheFile() async throws {
        try await super.testDockProgressAndNotificationsWithAnActionThatOpensTheFile()
    }

    override func testJobViewsShowTasksAndTheirRequestsReachTheService() async throws {
        try await super.testJobViewsShowTasksAndTheirRequestsReachTheService()
    }
}
