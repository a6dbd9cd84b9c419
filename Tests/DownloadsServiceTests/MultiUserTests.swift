import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The daemon as root on a private system bus with the shipped policy, and two real users (made
/// by the test) as clients under their own uids: files are made with the caller's credentials,
/// and neither user can make the daemon touch what they could not touch themselves.
final class MultiUserTests: SystemBusTestCase {
    nonisolated(unsafe) static var users: TestUsers?

    /// nginx over TLS, made once for the class (the daemon trusts its CA through --ca-file).
    nonisolated(unsafe) static var tls: (server: TLSTestServer, directory: TemporaryDirectory)?

    override class func tearDown() {
        if users != nil { TestUsers.remove() }
        users = nil
        tls?.server.stop()
        tls?.directory.remove()
        tls = nil
        super.tearDown()
    }

    var users: TestUsers!
    var tls: TLSTestServer { Self.tls!.server }

    /// Two transfer places and a small task quota, so that sharing and limits show quickly.
    override var extraArguments: [String] {
        ["--max-running", "2", "--max-tasks-per-user", "20", "--ca-file", tls.certificates.caFile] + helperArguments
    }

    /// Set by a test before it starts the daemon again (another file helper, its timeout).
    var helperArguments: [String] = []

    override func setUp() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: creates users and runs the daemon as root") }
        if Self.users == nil { Self.users = try TestUsers.create() }
        if Self.tls == nil {
            let directory = try TemporaryDirectory(prefix: "tls-test")
            Self.tls = (try TLSTestServer(in: directory.path), directory)
        }
        users = Self.users
        try await super.setUp()
        chmod(directory.path, 0o755)
    }

    /// A directory `owner` owns with `mode`.
    func makeDirectory(_ name: String, owner: TestUsers.User?, mode: mode_t) throws -> String {
        let path = directory.file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        if let owner { chown(path, owner.uid, owner.gid) }
        chmod(path, mode)
        return path
    }

    /// Runs python3-dbus as `user` (with `umask`), with `SystemBusTestCase.python`'s helpers.
    func python(as user: TestUsers.User, umask: Int = 0o022, _ body: String) async throws -> [String: Any] {
        try await python(uid: user.uid, gid: user.gid, setprivGroups: "--init-groups", umask: umask, body)
    }

    var daemonLogText: String { (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "" }

    func owner(of path: String) -> (uid: UInt32, mode: UInt32)? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (info.st_uid, UInt32(info.st_mode) & 0o7777)
    }

    func testFilesAreMadeWithTheCallersCredentialsAndUmask() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let content = Self.content(300_000)
        http.set("/s", Route(content: content))
        var slow = Route(content: Self.content(400_000, seed: 2))
        slow.bytesPerSecond = 400_000
        http.set("/slow", slow)
        let result = try await python(
            as: users.a, umask: 0o027,
            """
            path = start('\(http.url("/s"))', '\(home)/s.bin')
            out['state'] = wait(path, ['finished', 'failed'])
            slow = start('\(http.url("/slow"))', '\(home)/slow.bin')
            wait_bytes(slow, 50000)
            out['partial'] = [n for n in os.listdir('\(home)') if n.endswith('.part')]
            st = os.stat('\(home)/' + out['partial'][0]) if out['partial'] else None
            out['partial_owner'] = [st.st_uid, st.st_mode & 0o7777] if st else None
            out['slow'] = wait(slow, ['finished', 'failed'])
            """)
        XCTAssertEqual(result["state"] as? String, "finished", daemonLogText)
        XCTAssertEqual(sha256(ofFile: home + "/s.bin"), Self.sha256(content))
        let finished = owner(of: home + "/s.bin")
        XCTAssertEqual(finished?.uid, users.a.uid, "the finished file is the caller's")
        XCTAssertEqual(finished?.mode, 0o640, "0666 less the caller's umask 027")
        XCTAssertEqual(
            result["partial_owner"] as? [Int], [Int(users.a.uid), 0o600], "the partial file is the caller's, 0600")
        XCTAssertEqual(result["slow"] as? String, "finished")
        // The helper that made them runs as A, with no way back to root.
        let helpers = try await run(["pgrep", "-f", "downloads-file-helper --uid \(users.a.uid)$"])
        let pid = try XCTUnwrap(helpers.stdout.split(separator: "\n").first.map(String.init), helpers.description)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let fields = Dictionary(
            status.split(separator: "\n").compactMap { line -> (String, String)? in
                let parts = line.split(separator: ":", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces)) : nil
            }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(
            fields["Uid"]?.split(separator: "\t").map(String.init), Array(repeating: "\(users.a.uid)", count: 4))
        XCTAssertEqual(
            fields["Gid"]?.split(separator: "\t").map(String.init), Array(repeating: "\(users.a.gid)", count: 4))
        XCTAssertEqual(fields["NoNewPrivs"], "1")
        XCTAssertEqual(fields["CapEff"], "0000000000000000")
        XCTAssertEqual(fields["CapPrm"], "0000000000000000")
    }

    func testAnotherUsersPlacesAnswerLikeMissingOnes() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let content = Self.content(600_000)
        var slow = Route(content: content)
        slow.bytesPerSecond = 300_000
        http.set("/slow", slow)
        let a = try await python(
            as: users.a,
            """
            path = start('\(http.url("/slow"))', '\(home)/mine.bin')
            wait_bytes(path, 60000)
            out['blob'] = list(bytes(m.Pause(path)))
            out['path'] = path
            """)
        let blob = try XCTUnwrap(a["blob"] as? [Int])
        let partials = try FileManager.default.contentsOfDirectory(atPath: home).filter { $0.hasSuffix(".part") }
        XCTAssertEqual(partials.count, 1)
        let partialSum = sha256(ofFile: home + "/" + (partials.first ?? ""))
        try FileManager.default.createDirectory(atPath: home + "/sub", withIntermediateDirectories: false)
        chown(home + "/sub", users.a.uid, users.a.gid)
        let b = try await python(
            as: users.b,
            """
            url = '\(http.url("/slow"))'
            out['into_home'] = err(lambda: start(url, '\(home)/x.bin'))
            out['onto_existing'] = err(lambda: start(url, '\(home)/mine.bin'))
            out['into_sub'] = err(lambda: start(url, '\(home)/sub/x.bin'))
            out['into_missing'] = err(lambda: start(url, '\(directory.file("missing"))/x.bin'))
            out['into_etc'] = err(lambda: start(url, '/etc/x.bin'))
            out['resume_as_b'] = err(lambda: m.ResumeWithData(dbus.ByteArray(bytes(\(blob))), dbus.Dictionary({}, signature='sv')))
            out['pause_a'] = err(lambda: m.Pause('\(a["path"] as? String ?? "")'))
            out['pause_missing'] = err(lambda: m.Pause('/org/example/Downloads/tasks/99999'))
            """)
        func text(_ key: String, _ path: String) -> String {
            (b[key] as? String ?? "").replacingOccurrences(of: path, with: "P")
        }
        // What B can see (A's home is a directory) is said; what B cannot (inside it) reads as missing.
        XCTAssertEqual(
            b["into_home"] as? String, "org.example.Downloads.Error.FileError: you cannot create files in \(home)")
        XCTAssertEqual(b["onto_existing"] as? String, b["into_home"] as? String, "no FileExists oracle for A's files")
        XCTAssertTrue(
            text("into_missing", directory.file("missing") + "/x.bin").hasPrefix(
                "org.example.Downloads.Error.InvalidArgument"), "\(b)")
        XCTAssertEqual(
            text("into_sub", home + "/sub/x.bin"), text("into_missing", directory.file("missing") + "/x.bin"),
            "a directory B cannot reach answers exactly like a missing one")
        XCTAssertEqual(
            b["into_etc"] as? String, "org.example.Downloads.Error.FileError: you cannot create files in /etc")
        XCTAssertTrue(
            (b["resume_as_b"] as? String ?? "").hasPrefix("org.example.Downloads.Error.InvalidResumeData"), "\(b)")
        XCTAssertEqual(
            text("pause_a", a["path"] as? String ?? "-"), text("pause_missing", "/org/example/Downloads/tasks/99999"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/x.bin"))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: "/etc").filter {
                $0.hasPrefix(".org.example.Downloads")
            }, [])
        XCTAssertEqual(sha256(ofFile: home + "/" + (partials.first ?? "")), partialSum, "A's partial file is untouched")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: home).sorted(), (partials + ["sub"]).sorted(),
            "B made nothing in A's home")
    }

    /// B plants links and files where A's next partial file will be (task ids are visible), in
    /// a shared directory and in a sticky one; A's downloads never write through them and A's
    /// files stay as they were.
    func testPlantedLinksAndFilesAreNeverFollowed() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let shared = try makeDirectory("shared", owner: nil, mode: 0o777)
        let sticky = try makeDirectory("sticky", owner: nil, mode: 0o1777)
        let precious = home + "/precious"
        try Data("A's precious file".utf8).write(to: URL(fileURLWithPath: precious))
        chown(precious, users.a.uid, users.a.gid)
        chmod(precious, 0o600)
        let content = Self.content(200_000)
        http.set("/s", Route(content: content))
        // B learns the next task id from its own task, then plants for the next ones.
        let b = try await python(
            as: users.b,
            """
            mine = start('\(http.url("/s"))', '\(shared)/b.bin')
            n = int(mine.rsplit('/', 1)[1])
            for i in range(n + 1, n + 4):
                os.symlink('\(precious)', '\(shared)/.org.example.Downloads-%d.part' % i)
                os.symlink('\(precious)', '\(sticky)/.org.example.Downloads-%d.part' % i)
            open('\(shared)/b-own', 'w').write('B')
            os.unlink('\(shared)/.org.example.Downloads-%d.part' % (n + 3))
            os.link('\(shared)/b-own', '\(shared)/.org.example.Downloads-%d.part' % (n + 3))
            out['n'] = n
            """)
        let n = try XCTUnwrap(b["n"] as? Int)
        let a = try await python(
            as: users.a,
            """
            first = start('\(http.url("/s"))', '\(shared)/one.bin')
            out['first'] = [first, wait(first, ['finished', 'failed'])]
            second = start('\(http.url("/s"))', '\(sticky)/two.bin')
            out['second'] = [second, wait(second, ['finished', 'failed']), str(prop(second, 'ErrorMessage'))]
            third = start('\(http.url("/s"))', '\(shared)/three.bin')
            out['third'] = [third, wait(third, ['finished', 'failed'])]
            """)
        XCTAssertEqual((a["first"] as? [String])?.first, "/org/example/Downloads/tasks/\(n + 1)")
        XCTAssertEqual((a["first"] as? [String])?.last, "finished", daemonLogText)
        XCTAssertEqual(sha256(ofFile: shared + "/one.bin"), Self.sha256(content))
        XCTAssertEqual(owner(of: shared + "/one.bin")?.uid, users.a.uid)
        // In the sticky directory A cannot remove B's link: the task fails and says why.
        let second = a["second"] as? [String] ?? []
        XCTAssertEqual(second.dropFirst().first, "failed", "\(a)")
        XCTAssertTrue(second.last?.contains("did not create is in the way") == true, "\(second)")
        XCTAssertEqual(
            owner(of: sticky + "/.org.example.Downloads-\(n + 2).part")?.uid, users.b.uid, "B's link is still there")
        // A second name of B's file is replaced, never written into.
        XCTAssertEqual((a["third"] as? [String])?.last, "finished")
        XCTAssertEqual(sha256(ofFile: shared + "/three.bin"), Self.sha256(content))
        XCTAssertEqual(try String(contentsOfFile: shared + "/b-own", encoding: .utf8), "B")
        XCTAssertEqual(
            try String(contentsOfFile: precious, encoding: .utf8), "A's precious file",
            "A's file never written through a link")
        XCTAssertEqual(owner(of: precious)?.mode, 0o600)
    }

    /// A paused task's partial file is swapped while it waits (for a link to A's file, then for
    /// B's own file with other bytes): the resumed task never writes through the link and never
    /// splices B's bytes into A's download.
    func testSwappedPartialFileIsNeverResumedFrom() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let shared = try makeDirectory("shared", owner: nil, mode: 0o777)
        let precious = home + "/precious"
        try Data("A's precious file".utf8).write(to: URL(fileURLWithPath: precious))
        chown(precious, users.a.uid, users.a.gid)
        let content = Self.content(500_000)
        var slow = Route(content: content)
        slow.bytesPerSecond = 500_000
        http.set("/slow", slow)
        for swap in ["link", "file"] {
            let target = shared + "/\(swap).bin"
            let a = try await python(
                as: users.a,
                """
                path = start('\(http.url("/slow"))', '\(target)')
                wait_bytes(path, 100000)
                m.Pause(path)
                out['path'] = path
                """)
            let path = try XCTUnwrap(a["path"] as? String)
            let partial = shared + "/.org.example.Downloads-\(path.split(separator: "/").last ?? "").part"
            XCTAssertEqual(owner(of: partial)?.uid, users.a.uid)
            let b = try await python(
                as: users.b,
                swap == "link"
                    ? """
                    os.unlink('\(partial)')
                    os.symlink('\(precious)', '\(partial)')
                    """
                    : """
                    size = os.stat('\(partial)').st_size
                    os.unlink('\(partial)')
                    open('\(partial)', 'wb').write(b'B' * size)
                    """)
            XCTAssertNotNil(b)
            let resumed = try await python(
                as: users.a,
                """
                m.Resume('\(path)')
                out['state'] = wait('\(path)', ['finished', 'failed'])
                """)
            XCTAssertEqual(resumed["state"] as? String, "finished", "\(swap): \(daemonLogText)")
            XCTAssertEqual(sha256(ofFile: target), Self.sha256(content), "\(swap): no bytes of the swapped file")
            XCTAssertEqual(owner(of: target)?.uid, users.a.uid)
        }
        XCTAssertEqual(try String(contentsOfFile: precious, encoding: .utf8), "A's precious file")
    }

    /// On the system bus link-local addresses (cloud metadata, printers' admin pages) are out of
    /// other users' reach by default; the check comes before any connection, so nothing leaves
    /// this machine.
    func testLinkLocalIsDeniedToUsersByDefault() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let a = try await python(
            as: users.a,
            """
            path = start('http://169.254.169.254/latest/meta-data/', '\(home)/meta')
            out['state'] = wait(path, ['finished', 'failed'])
            out['error'] = str(prop(path, 'Error')) + ': ' + str(prop(path, 'ErrorMessage'))
            """)
        XCTAssertEqual(a["state"] as? String, "failed")
        XCTAssertEqual(
            a["error"] as? String,
            "org.example.Downloads.Error.AccessDenied: 169.254.169.254 is in a network this service does not reach for you (169.254.0.0/16)"
        )
    }

    /// ListAllTasks and Cancel of another user's task: refused (and the task a missing one)
    /// without polkit, or when polkit says no; allowed when polkit authorizes the caller's
    /// connection for org.example.Downloads.manage-all. Pause stays the owner's.
    func testAdministratorsNeedPolkitToSeeAndCancelEveryonesTasks() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        var slow = Route(content: Self.content(2_000_000))
        slow.bytesPerSecond = 200_000
        http.set("/slow", slow)
        let a = try await python(
            as: users.a,
            """
            path = start('\(http.url("/slow"))', '\(home)/big.bin')
            wait_bytes(path, 10000)
            out['path'] = path
            """)
        let path = try XCTUnwrap(a["path"] as? String)
        let probe = """
            out['name'] = bus.get_unique_name()
            out['all'] = err(lambda: [str(p) for p in m.ListAllTasks()])
            out['url'] = err(lambda: prop('\(path)', 'URL'))
            out['pause'] = err(lambda: m.Pause('\(path)'))
            out['metrics'] = err(lambda: call('\(path)', 'GetMetrics'))
            out['cancel'] = err(lambda: m.Cancel('\(path)'))
            """
        let noPolkit = try await python(as: users.b, probe)
        XCTAssertTrue(
            (noPolkit["all"] as? String ?? "").hasPrefix("org.example.Downloads.Error.AccessDenied"), "\(noPolkit)")
        XCTAssertTrue(
            (noPolkit["cancel"] as? String ?? "").hasPrefix("org.example.Downloads.Error.NotFound"), "\(noPolkit)")
        XCTAssertTrue(
            (noPolkit["metrics"] as? String ?? "").hasPrefix("org.example.Downloads.Error.NotFound"),
            "another user's timings (its URLs, its servers' addresses) are not shown: \(noPolkit)")
        _ = try await startMock("polkitd", name: "org.freedesktop.PolicyKit1")
        let saysNo = try await python(as: users.b, probe)
        XCTAssertTrue(
            (saysNo["all"] as? String ?? "").hasPrefix("org.example.Downloads.Error.AccessDenied"), "\(saysNo)")
        XCTAssertTrue((saysNo["url"] as? String ?? "").hasPrefix("org.example.Downloads.Error.NotFound"), "\(saysNo)")
        let allowed = try await run([
            "gdbus", "call", "--address", bus.address, "--dest", "org.freedesktop.PolicyKit1",
            "--object-path", "/org/freedesktop/PolicyKit1/Authority", "--method",
            "org.freedesktop.DBus.Mock.SetAllowed",
            "['org.example.Downloads.manage-all']",
        ])
        XCTAssertEqual(allowed.status, 0, allowed.description)
        let admin = try await python(as: users.b, probe)
        XCTAssertEqual(admin["all"] as? String, "ok:['\(path)']", "\(admin)")
        XCTAssertEqual(admin["url"] as? String, "ok:\(http.url("/slow"))")
        XCTAssertTrue(
            (admin["pause"] as? String ?? "").hasPrefix("org.example.Downloads.Error.NotFound"),
            "pausing stays the owner's: \(admin)")
        XCTAssertTrue(
            (admin["metrics"] as? String ?? "").hasPrefix("org.example.Downloads.Error.NotFound"),
            "timings stay the owner's: \(admin)")
        XCTAssertEqual(admin["cancel"] as? String, "ok:None")
        let state = try await property(ObjectPath(path), "State")?.stringValue
        XCTAssertEqual(state, "cancelled")
        // polkit was asked about the caller's own connection.
        let log = try String(contentsOfFile: directory.file("polkitd.log"), encoding: .utf8)
        XCTAssertTrue(log.contains("CheckAuthorization") && log.contains(admin["name"] as? String ?? "-"), log)
    }

    /// A's app (python3-dbus with a GLib main loop, as user A) registers a completion handler on
    /// the system bus; under the bus's default-deny policy the shipped rule lets the daemon call it.
    func testUsersCompletionHandlerIsCalledOnTheSystemBus() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        http.set("/x", Route(content: Self.content(3000)))
        let result = try await python(
            as: users.a,
            """
            import dbus.service, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            app_bus = dbus.bus.BusConnection('\(bus.address)')
            loop = GLib.MainLoop()
            class App(dbus.service.Object):
                @dbus.service.method('org.example.Downloads.Client', in_signature='s')
                def HandleEventsForBackgroundSession(self, session):
                    out['handled'] = str(session)
                    GLib.idle_add(loop.quit)
            app = App(app_bus, '/app')
            manager = dbus.Interface(app_bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            manager.RegisterCompletionHandler('bg', '/app', dbus.Dictionary({}, signature='sv'))
            out['task'] = str(manager.Start('\(http.url("/x"))', '\(home)/x', dbus.Dictionary({'session': 'bg'}, signature='sv')))
            GLib.timeout_add(20000, loop.quit)
            loop.run()
            """)
        XCTAssertEqual(result["handled"] as? String, "bg", "\(result)\n\(daemonLogText)")
        XCTAssertEqual(sha256(ofFile: home + "/x"), Self.sha256(Self.content(3000)))
    }

    /// A python3-dbus agent of a user on the system bus: registered for session `bg` to answer
    /// `http-auth` with `user` and `password`, noting the tasks it is asked about in `out['asked']`;
    /// `then` runs before its main loop (which it must end).
    func challengeAgentScript(user: String, password: String, then: String) -> String {
        """
        import dbus.service, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        app_bus = dbus.bus.BusConnection('\(bus.address)')
        loop = GLib.MainLoop()
        asked = []
        class App(dbus.service.Object):
            @dbus.service.method('org.example.Downloads.Client', in_signature='s')
            def HandleEventsForBackgroundSession(self, session):
                pass
            @dbus.service.method('org.example.Downloads.Client', in_signature='osa{sv}', out_signature='sa{sv}')
            def HandleChallenge(self, task, kind, details):
                asked.append(str(task))
                self.seen(str(task))
                return ('use', {'user': '\(user)', 'password': '\(password)'})
        App.seen = lambda self, task: None
        app = App(app_bus, '/app')
        manager = dbus.Interface(app_bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
        manager.RegisterCompletionHandler('bg', '/app', dbus.Dictionary({'challenges': dbus.Array(['http-auth'], signature='s')}, signature='sv'))
        \(then)
        loop.run()
        out['asked'] = asked
        """
    }

    /// A challenge goes to the object its task's own user registered: B's agent, registered for a
    /// session of the same name, never hears of A's task, and A's answer is never B's.
    func testAUsersChallengeIsNeverAskedOfAnotherUsersAgent() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let content = Self.content(40_000, seed: 12)
        var route = Route(content: content)
        route.requiredAuthorization = "Basic " + Data("ann:right".utf8).base64EncodedString()
        http.set("/members", route)
        // B's agent runs beside A's task (its main loop answering), noting any question in its home.
        let bHome = try makeDirectory("b", owner: users.b, mode: 0o700)
        let bAgent = try ChildProcess([
            "setpriv", "--reuid=\(users.b.uid)", "--regid=\(users.b.gid)", "--init-groups", "--reset-env",
            "/usr/bin/python3", "-c",
            "out = {}\n"
                + challengeAgentScript(
                    user: "bee", password: "wrong",
                    then:
                        "GLib.timeout_add(60000, loop.quit)\nApp.seen = lambda self, task: open('\(bHome)/asked', 'a').write(task)"
                ),
        ])
        defer { bAgent.stop() }
        try await until("B's agent registered", seconds: 20) {
            self.daemonLogText.contains("completion handler for session 'bg' of uid \(self.users.b.uid)")
        }
        let start = """
            task = manager.Start('\(http.url("/members"))', '\(home)/m', dbus.Dictionary({'session': 'bg'}, signature='sv'))
            def poll():
                state = str(app_bus.get_object('org.example.Downloads', task).Get('org.example.Downloads.Task', 'State', dbus_interface='org.freedesktop.DBus.Properties'))
                if state in ('finished', 'failed'):
                    out['state'] = state
                    loop.quit()
                    return False
                return True
            GLib.timeout_add(50, poll)
            GLib.timeout_add(30000, loop.quit)
            """
        let a = try await python(as: users.a, challengeAgentScript(user: "ann", password: "right", then: start))
        XCTAssertEqual(a["state"] as? String, "finished", "\(a)\n\(daemonLogText)")
        XCTAssertEqual((a["asked"] as? [String])?.count, 1, "\(a)")
        XCTAssertEqual(sha256(ofFile: home + "/m"), Self.sha256(content))
        XCTAssertFalse(FileManager.default.fileExists(atPath: bHome + "/asked"), "B's agent is never asked")
    }

    /// A fills both transfer places and queues more; B's one task takes the next free place
    /// before A's queued ones (fewest running first), and B's quota is B's own. (Files above the
    /// 1 MiB of a short transfer, which would not count against the transfer limits at all.)
    func testOneUsersManyTasksDoNotKeepAnothersWaiting() async throws {
        let aHome = try makeDirectory("a", owner: users.a, mode: 0o700)
        let bHome = try makeDirectory("b", owner: users.b, mode: 0o700)
        var slow = Route(content: Self.content(1_500_000))
        slow.bytesPerSecond = 1_500_000
        http.set("/slow", slow)
        let a = try await python(
            as: users.a,
            """
            out['tasks'] = [start('\(http.url("/slow"))', '\(aHome)/%d' % i) for i in range(4)]
            out['quota'] = err(lambda: [start('\(http.url("/slow"))', '\(aHome)/q%d' % i) for i in range(20)])
            """)
        let aTasks = try XCTUnwrap(a["tasks"] as? [String])
        XCTAssertTrue((a["quota"] as? String ?? "").hasPrefix("org.example.Downloads.Error.QuotaExceeded"), "\(a)")
        // Cancel what went over A's first four, so only those compete with B.
        for path in try await call("ListAllTasks").first?.objectPathArrayValue ?? []
        where !aTasks.contains(path.rawValue) {
            _ = try await call("Cancel", [.objectPath(path)])
        }
        let b = try await python(
            as: users.b,
            """
            mine = start('\(http.url("/slow"))', '\(bHome)/mine')
            out['state'] = wait(mine, ['finished', 'failed'])
            """)
        XCTAssertEqual(b["state"] as? String, "finished", "B's quota is not A's: \(b)")
        var statesWhenBFinished: [String] = []
        for path in aTasks {
            statesWhenBFinished.append(try await property(ObjectPath(path), "State")?.stringValue ?? "?")
        }
        XCTAssertTrue(
            statesWhenBFinished.contains { $0 != "finished" },
            "B finished while A still had tasks waiting or running: \(statesWhenBFinished)")
        for path in aTasks { try await waitState(ObjectPath(path), ["finished"]) }
    }
}

extension MultiUserTests {
    /// A user's requests go through clients pinned to a checked address (--deny-network), kept
    /// and shared while used: small files from one host share one connection, and a segmented
    /// download still opens its four.
    func testAUsersHTTPSDownloadsReuseTheirPinnedConnection() async throws {
        let home = try makeDirectory("pinned", owner: users.a, mode: 0o700)
        var contents: [[UInt8]] = []
        for n in 0..<6 {
            contents.append(Self.content(5_000 + n, seed: UInt32(300 + n)))
            try tls.file("pinned-\(n).bin", contents[n])
        }
        let big = Self.content(16 << 20, seed: 310)
        try tls.file("pinned-big.bin", big)
        let a = try await python(
            as: users.a,
            """
            states = []
            for n in range(6):
                path = start('\(tls.url(.http2, "/pinned-"))%d.bin' % n, '\(home)/%d.bin' % n)
                states.append(wait(path, ['finished', 'failed']))
            path = start('\(tls.url(.http1, "/limited/pinned-big.bin"))', '\(home)/big.bin', connections=dbus.UInt32(4))
            states.append(wait(path, ['finished', 'failed'], 90))
            out['states'] = states
            out['error'] = str(prop(path, 'ErrorMessage'))
            """)
        XCTAssertEqual(a["states"] as? [String], Array(repeating: "finished", count: 7), "\(a["error"] ?? "")")
        for n in 0..<6 { XCTAssertEqual(sha256(ofFile: "\(home)/\(n).bin"), Self.sha256(contents[n])) }
        XCTAssertEqual(sha256(ofFile: "\(home)/big.bin"), Self.sha256(big))
        let small = tls.requests.filter { $0.path.hasPrefix("/pinned-") && $0.port == tls.port(.http2) }
        XCTAssertEqual(small.count, 6)
        XCTAssertEqual(Set(small.map(\.connection)).count, 1, "six downloads, one connection")
        try await until("nginx logged the first request of the segmented download") {
            tls.requests(for: "/limited/pinned-big.bin", on: .http1).contains { $0.range == nil }
        }
        XCTAssertEqual(Set(tls.requests(for: "/limited/pinned-big.bin", on: .http1).map(\.connection)).count, 4)

        // The same to the server that offers HTTP/2: `connections: 4` is four TCP connections
        // there too (issue 58, finding 7), each an HTTP/1.1 request.
        let b = try await python(
            as: users.a,
            """
            path = start('\(tls.url(.http2, "/limited/pinned-big.bin"))', '\(home)/big2.bin', connections=dbus.UInt32(4))
            out['state'] = wait(path, ['finished', 'failed'], 90)
            """)
        XCTAssertEqual(b["state"] as? String, "finished")
        XCTAssertEqual(sha256(ofFile: "\(home)/big2.bin"), Self.sha256(big))
        try await until("nginx logged the first request of the HTTP/2 server's download") {
            tls.requests(for: "/limited/pinned-big.bin", on: .http2).contains { $0.range == nil }
        }
        let overH2 = tls.requests(for: "/limited/pinned-big.bin", on: .http2)
        XCTAssertEqual(
            Set(overH2.map(\.connection)).count, 4,
            "\(overH2.map { "\($0.connection) \($0.httpVersion) \($0.range ?? "-")" })")
        XCTAssertTrue(overH2.allSatisfy { $0.httpVersion == "HTTP/1.1" }, "\(overH2.map(\.httpVersion))")
    }
}
