import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// `HandleChallenge`: a task that meets a login or an expired token asks the app that registered
/// for such questions, waits for its answer holding no place, and goes on from its bytes; with
/// no answer, a refused one or an app that did not register, it fails as it always did.
final class ChallengeTests: TLSDaemonTestCase {
    override var extraArguments: [String] { ["--ca-file", tls.certificates.caFile] }

    /// One question as the app heard it.
    struct Asked: Sendable {
        var task: String
        var kind: String
        var details: [String: DBusValue]
    }

    /// An app object answering `HandleChallenge` with `answer` (and completion calls).
    final class Agent: Sendable {
        let connection: Connection
        let asked = NIOLockedValueBox([Asked]())

        init(connection: Connection, answer: @escaping @Sendable (Asked) async -> [DBusValue]) throws {
            self.connection = connection
            try connection.export(
                ExportedObject(
                    path: "/app",
                    interfaces: [
                        ExportedInterface(
                            DownloadsInterfaces.client,
                            methods: [
                                "HandleEventsForBackgroundSession": { _ in [] },
                                "HandleChallenge": { [asked] call in
                                    let question = Asked(
                                        task: call.arguments[0].stringValue ?? "",
                                        kind: call.arguments[1].stringValue ?? "",
                                        details: call.arguments[2].vardictValue ?? [:])
                                    asked.withLockedValue { $0.append(question) }
                                    return await answer(question)
                                },
                            ])
                    ]))
        }

        var questions: [Asked] { asked.withLockedValue { $0 } }
    }

    /// An agent on its own connection, registered for `session` with `options`.
    func agent(
        _ session: String = "app",
        options: [String: DBusValue] = ["challenges": .array(element: .string, [.string("http-auth")])],
        answer: @escaping @Sendable (Asked) async -> [DBusValue]
    ) async throws -> Agent {
        let agent = try Agent(connection: try await Connection.open(.address(bus.address)), answer: answer)
        _ = try await agent.connection.call(
            destination: "org.example.Downloads", path: "/org/example/Downloads", interface: "org.example.Downloads",
            method: "RegisterCompletionHandler", arguments: [.string(session), .objectPath("/app"), .vardict(options)])
        return agent
    }

    static func use(_ answer: [String: DBusValue]) -> [DBusValue] { [.string("use"), .vardict(answer)] }
    static let login = use([
        "user": .string(TLSTestServer.user), "password": .string(TLSTestServer.password),
    ])

    /// Every file of the state directory, as bytes (the database, its WAL, the key).
    func stateFiles() throws -> [String: Data] {
        var files: [String: Data] = [:]
        let names = try FileManager.default.subpathsOfDirectory(atPath: stateDirectory)
        for name in names {
            let path = stateDirectory + "/" + name
            if let data = FileManager.default.contents(atPath: path) { files[name] = data }
        }
        return files
    }

    /// How the task ended: `finished`, `cancelled`, or `failed` and its error's name.
    func outcome(of task: ObjectPath, seconds: Double = 60) async throws -> String {
        let state = try await waitState(task, ["failed", "finished", "cancelled"], seconds: seconds)
        guard state == "failed" else { return state }
        return "failed " + (try await property(task, "Error")?.stringValue ?? "")
    }

    func assertNoFileHolds(_ secret: String, file: StaticString = #filePath, line: UInt = #line) throws {
        for (name, data) in try stateFiles() {
            XCTAssertNil(data.range(of: Data(secret.utf8)), "\(name) holds the secret in clear", file: file, line: line)
        }
    }

    func testALoginTheAppGivesFinishesTheDownloadAndIsKeptNowhere() async throws {
        let content = Self.content(3_000_000)
        try tls.file("report.bin", content)
        let waiting = NIOLockedValueBox(false)
        let app = try await agent { _ in
            // Held until the test saw the task wait for it.
            while !waiting.withLockedValue({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
            return Self.login
        }
        defer { app.connection.close() }
        let target = directory.file("report.bin")
        let task = try await start(
            tls.url(.http1, "/private/report.bin"), target, ["session": .string("app")])
        try await until("the task waits for its app") {
            try await self.property(task, "WaitingFor")?.stringValue == "app"
        }
        let state = try await property(task, "State")?.stringValue
        XCTAssertEqual(state, "queued", "a task that waits for its app is queued, not failed")
        waiting.withLockedValue { $0 = true }
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let asked = try XCTUnwrap(app.questions.first)
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(asked.task, task.rawValue)
        XCTAssertEqual(asked.kind, "http-auth")
        XCTAssertEqual(asked.details["scheme"]?.stringValue, "Basic")
        XCTAssertEqual(asked.details["realm"]?.stringValue, TLSTestServer.realm)
        XCTAssertEqual(asked.details["host"]?.stringValue, "localhost")
        XCTAssertEqual(asked.details["port"]?.uint16Value, UInt16(tls.port(.http1)))
        XCTAssertEqual(asked.details["url"]?.stringValue, tls.url(.http1, "/private/report.bin"))
        XCTAssertEqual(asked.details["failures"]?.uint32Value, 0)
        XCTAssertEqual(tls.requests(for: "/private/report.bin", on: .http1).map(\.status), [401, 200])
        let basic = Data("\(TLSTestServer.user):\(TLSTestServer.password)".utf8).base64EncodedString()
        try assertNoFileHolds(TLSTestServer.password)
        try assertNoFileHolds(basic)
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertFalse(log.contains(TLSTestServer.password) || log.contains(basic), "the log holds the secret")
    }

    func testAWrongPasswordIsAskedAgainAndTheThirdRefusalFailsTheTask() async throws {
        try tls.file("a.bin", Self.content(10_000))
        let app = try await agent { _ in
            Self.use(["user": .string(TLSTestServer.user), "password": .string("wrong")])
        }
        defer { app.connection.close() }
        let task = try await start(
            tls.url(.http1, "/private/a.bin"), directory.file("a.bin"), ["session": .string("app")])
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(app.questions.map { $0.details["failures"]?.uint32Value }, [0, 1, 2])
        XCTAssertEqual(tls.requests(for: "/private/a.bin", on: .http1).map(\.status), [401, 401, 401, 401])
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("a.bin")))
    }

    func testDefaultCancelAndSilenceEachEndTheTaskAsWithoutAnApp() async throws {
        try tls.file("b.bin", Self.content(10_000))
        let defaulted = try await agent("d") { _ in [.string("default"), .vardict([:])] }
        defer { defaulted.connection.close() }
        let cancelling = try await agent("c") { _ in [.string("cancel"), .vardict([:])] }
        defer { cancelling.connection.close() }
        let silent = try await agent(
            "s",
            options: [
                "challenges": .array(element: .string, [.string("http-auth")]), "challenge_timeout": .uint32(1),
            ]
        ) { _ in
            try? await Task.sleep(for: .seconds(30))
            return Self.login
        }
        defer { silent.connection.close() }
        let url = tls.url(.http1, "/private/b.bin")
        let d = try await start(url, directory.file("d"), ["session": .string("d")])
        let c = try await start(url, directory.file("c"), ["session": .string("c")])
        let s = try await start(url, directory.file("s"), ["session": .string("s")])
        let dEnded = try await outcome(of: d)
        XCTAssertEqual(dEnded, "failed org.example.Downloads.Error.HTTPError")
        let cEnded = try await outcome(of: c)
        XCTAssertEqual(cEnded, "cancelled")
        let sEnded = try await outcome(of: s, seconds: 20)
        XCTAssertEqual(sEnded, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(
            [defaulted, cancelling, silent].map { $0.questions.count }, [1, 1, 1], "each app asked once")
    }

    func testAnAppThatDidNotRegisterForChallengesIsNeverAsked() async throws {
        try tls.file("c.bin", Self.content(10_000))
        let app = try await agent(options: [:]) { _ in Self.login }
        defer { app.connection.close() }
        let task = try await start(tls.url(.http1, "/private/c.bin"), directory.file("c"), ["session": .string("app")])
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(app.questions.count, 0)
        // Another session's app is not asked for this one's task either.
        let other = try await agent("other") { _ in Self.login }
        defer { other.connection.close() }
        let again = try await start(
            tls.url(.http1, "/private/c.bin"), directory.file("d"), ["session": .string("mine")])
        let againEnded = try await outcome(of: again)
        XCTAssertEqual(againEnded, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(other.questions.count, 0)
    }

    func testHostileAnswersAreRefusedAndTheTaskFailsCleanly() async throws {
        try tls.file("h.bin", Self.content(10_000))
        let answers: [[DBusValue]] = [
            [.string("use"), .vardict(["user": .uint32(7), "password": .string("x")])],
            [.string("use"), .vardict(["headers": .stringDict(["X-Big": String(repeating: "a", count: 200_000)])])],
            [.string("use"), .vardict(["trust": .boolean(true)])],
            [.string("use"), .vardict(["headers": .stringDict(["Bad Name": "x"])])],
            [.string("use"), .vardict(["headers": .stringDict(["Authorization": "Bearer a\r\nX-Injected: 1"])])],
            // Start's header rules hold for an answer's headers too: none the service owns.
            [.string("use"), .vardict(["headers": .stringDict(["Host": "evil.example"])])],
            [.string("use"), .vardict(["headers": .stringDict(["Range": "bytes=0-1"])])],
            [.string("use"), .vardict(["headers": .stringDict(["Expect": "100-continue"])])],
            [.string("use"), .vardict(["headers": .stringDict(["Connection": "close"])])],
            [.string("use"), .vardict(["headers": .stringDict(["X-Org-Example-Downloads-Transaction": "1"])])],
            [.string("sure")],
            [.uint32(1), .vardict([:])],
        ]
        for (index, reply) in answers.enumerated() {
            let session = "hostile\(index)"
            let app = try await agent(session) { _ in reply }
            defer { app.connection.close() }
            let task = try await start(
                tls.url(.http1, "/private/h.bin"), directory.file("h\(index)"), ["session": .string(session)])
            let ended = try await outcome(of: task)
            XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError", "answer \(index)")
            XCTAssertEqual(app.questions.count, 1, "answer \(index)")
        }
        let listed = try await call("ListTasks", [.string("")]).first?.arrayValue?.count
        XCTAssertEqual(listed, answers.count, "the service keeps serving every task")
        XCTAssertFalse(tls.requests.contains { $0.path == "/private/h.bin" && $0.status == 200 })
    }

    func testAnExpiredTokenIsRenewedAndTheDownloadGoesOnFromItsBytes() async throws {
        let content = Self.content(3_000_000)
        var route = Route(content: content)
        route.requiredAuthorization = "Bearer one"
        route.bytesPerSecond = 1_000_000
        route.closeAfter = 1_500_000
        route.misbehaveTimes = 1
        http.set("/token", route)
        let app = try await agent { _ in Self.use(["headers": .stringDict(["Authorization": "Bearer two"])]) }
        defer { app.connection.close() }
        let target = directory.file("token.bin")
        let task = try await start(
            http.url("/token"), target,
            ["session": .string("app"), "headers": .stringDict(["Authorization": "Bearer one"])])
        try await until("a megabyte arrived with the first token", seconds: 30) {
            (try await self.property(task, "BytesWritten")?.int64Value ?? 0) >= 1_000_000
        }
        // The token expires: from now on only the second one is taken.
        http.update("/token") { $0.requiredAuthorization = "Bearer two" }
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(app.questions.first?.details["scheme"]?.stringValue, "Basic")
        let requests = http.requests(for: "/token")
        XCTAssertEqual(requests.map(\.status), [200, 401, 206])
        // It went on from its bytes: what the server sent twice is less than what it had sent.
        let served = requests.reduce(0) { $0 + $1.bodyBytesSent }
        XCTAssertLessThan(served, content.count + 1_500_000, "served \(served) for \(content.count)")
        try assertNoFileHolds("Bearer two")
        // The token the task was started with is kept, sealed: neither it nor its name is in clear.
        try assertNoFileHolds("Bearer one")
        try assertNoFileHolds("Authorization")
    }

    func testTasksMeetingTheSameLoginAtOnceAskItOnceAndAllGoOn() async throws {
        let contents = (1...3).map { Self.content(200_000, seed: UInt32($0)) }
        for (index, content) in contents.enumerated() { try tls.file("same\(index).bin", content) }
        let release = NIOLockedValueBox(false)
        let app = try await agent { _ in
            while !release.withLockedValue({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
            return Self.login
        }
        defer { app.connection.close() }
        var tasks: [ObjectPath] = []
        for index in contents.indices {
            tasks.append(
                try await start(
                    tls.url(.http1, "/private/same\(index).bin"), directory.file("same\(index)"),
                    ["session": .string("app")]))
        }
        for task in tasks {
            try await until("every task waits for the one answer") {
                try await self.property(task, "WaitingFor")?.stringValue == "app"
            }
        }
        release.withLockedValue { $0 = true }
        for (index, task) in tasks.enumerated() {
            try await assertFinished(task)
            XCTAssertEqual(sha256(ofFile: directory.file("same\(index)")), Self.sha256(contents[index]))
        }
        XCTAssertEqual(app.questions.count, 1, "one question for the three tasks")
    }

    func testAnAppThatIsNotRunningIsStartedToAnswer() async throws {
        let content = Self.content(100_000)
        try tls.file("activated.bin", content)
        let script = directory.file("agent.py")
        let marker = directory.file("asked.txt")
        try """
        import dbus, dbus.service, dbus.mainloop.glib, sys
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()
        name = dbus.service.BusName('org.example.TestAgent', bus)
        class Agent(dbus.service.Object):
            @dbus.service.method('org.example.Downloads.Client', in_signature='s', out_signature='')
            def HandleEventsForBackgroundSession(self, session):
                pass
            @dbus.service.method('org.example.Downloads.Client', in_signature='osa{sv}', out_signature='sa{sv}')
            def HandleChallenge(self, task, kind, details):
                with open('\(marker)', 'a') as out:
                    out.write('%s %s %s\\n' % (kind, details['scheme'], details['realm']))
                GLib.timeout_add(500, loop.quit)
                return ('use', {'user': '\(TLSTestServer.user)', 'password': '\(TLSTestServer.password)'})
        agent = Agent(bus, '/org/example/TestAgent')
        if len(sys.argv) > 1:
            downloads = dbus.Interface(
                bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            downloads.RegisterCompletionHandler(
                'agent', '/org/example/TestAgent',
                {'bus_name': 'org.example.TestAgent', 'challenges': dbus.Array(['http-auth'], signature='s')})
            sys.exit(0)
        loop = GLib.MainLoop(); loop.run()
        """.write(toFile: script, atomically: true, encoding: .utf8)
        try """
        [D-BUS Service]
        Name=org.example.TestAgent
        Exec=/usr/bin/python3 \(script)
        """.write(
            toFile: bus.servicesDirectory + "/org.example.TestAgent.service", atomically: true, encoding: .utf8)
        // The app registers with its well-known name, then quits.
        let registered = try await run(["/usr/bin/python3", script, "register"])
        XCTAssertEqual(registered.status, 0, registered.description)
        let target = directory.file("activated.bin")
        let task = try await start(tls.url(.http1, "/private/activated.bin"), target, ["session": .string("agent")])
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let asked = try String(contentsOfFile: marker, encoding: .utf8)
        XCTAssertEqual(asked, "http-auth Basic \(TLSTestServer.realm)\n")
    }

    func testAnUploadThatMeetsALoginIsSentWithTheAppsAnswer() async throws {
        let content = Self.content(300_000, seed: 60)
        let source = directory.file("notes.txt")
        try Data(content).write(to: URL(fileURLWithPath: source))
        var route = Route.receiving(status: 201, reply: "{\"id\": 1}")
        route.requiredAuthorization = "Basic " + Data("bob:hunter2".utf8).base64EncodedString()
        http.set("/notes", route)
        let app = try await agent { _ in Self.use(["user": .string("bob"), "password": .string("hunter2")]) }
        defer { app.connection.close() }
        let reply = try await call(
            "Upload",
            [
                .string(http.url("/notes")), .string(source),
                .vardict(["session": .string("app"), "method": .string("POST"), "protocol": .string("plain")]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await assertFinished(task)
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(app.questions.first?.details["realm"]?.stringValue, "test")
        let received = try XCTUnwrap(http.received("/notes").last)
        XCTAssertEqual(Self.sha256(received.body), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/notes").map(\.status), [401, 201])
        try assertNoFileHolds("hunter2")
    }

    func testAProxyThatAsksForCredentialsGetsTheAppsForItAlone() async throws {
        let guarded = try TinyProxy(in: directory.path, credentials: ("alice", "pr0xy-pass"))
        defer { guarded.stop() }
        let content = Self.content(200_000, seed: 70)
        http.set("/via", Route(content: content))
        try tls.file("via.bin", content)
        let app = try await agent(options: ["challenges": .array(element: .string, [.string("proxy-auth")])]) { _ in
            Self.use(["user": .string("alice"), "password": .string("pr0xy-pass")])
        }
        defer { app.connection.close() }
        let options: [String: DBusValue] = ["session": .string("app"), "proxy": .string(guarded.url)]
        // Forwarded (an http URL) and tunnelled (https, the credentials in the CONNECT).
        try await download(http.url("/via"), to: directory.file("via-http"), expecting: content, options: options)
        try await download(
            tls.url(.http1, "/via.bin"), to: directory.file("via-https"), expecting: content, options: options)
        XCTAssertEqual(app.questions.map(\.kind), ["proxy-auth", "proxy-auth"])
        let asked = try XCTUnwrap(app.questions.first)
        XCTAssertEqual(asked.details["host"]?.stringValue, "127.0.0.1")
        XCTAssertEqual(asked.details["port"]?.uint16Value, UInt16(guarded.port))
        XCTAssertEqual(asked.details["url"]?.stringValue, "http://127.0.0.1:\(guarded.port)")
        // Each asked twice: refused (407) without credentials, then taken with the app's.
        XCTAssertEqual(guarded.forwardedRequests.count, 2)
        XCTAssertEqual(guarded.connectRequests.count, 2)
        XCTAssertNil(
            http.requests(for: "/via").last?.userHeaders["proxy-authorization"], "the proxy's credentials stay with it")
        try assertNoFileHolds("pr0xy-pass")
    }

    func testAPausedTaskAsksAgainWhenResumed() async throws {
        let content = Self.content(2_000_000, seed: 80)
        var route = Route(content: content)
        route.requiredAuthorization = "Basic " + Data("fay:pw".utf8).base64EncodedString()
        route.bytesPerSecond = 1_000_000
        http.set("/paused", route)
        let app = try await agent { _ in Self.use(["user": .string("fay"), "password": .string("pw")]) }
        defer { app.connection.close() }
        let task = try await start(http.url("/paused"), directory.file("paused.bin"), ["session": .string("app")])
        try await until("bytes came with the answer", seconds: 30) {
            (try await self.property(task, "BytesWritten")?.int64Value ?? 0) >= 300_000
        }
        _ = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: "Pause")
        XCTAssertEqual(app.questions.count, 1)
        _ = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: "Resume")
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: directory.file("paused.bin")), Self.sha256(content))
        XCTAssertEqual(app.questions.count, 2, "the answer ended with the run the Pause stopped")
        XCTAssertEqual(http.requests(for: "/paused").map(\.status), [401, 200, 401, 206])
    }

    func testAnHTTP10ServerThatAsksThenClosesGetsTheLoginForADownloadAndAnUpload() async throws {
        let old = try HTTP10Server(in: directory.path)
        defer { old.stop() }
        let app = try await agent { _ in Self.use(["user": .string("hal"), "password": .string("9000")]) }
        defer { app.connection.close() }
        // A download whose answers end by closing (no Content-Length).
        let target = directory.file("old.bin")
        let task = try await start(old.url("/login/old.bin"), target, ["session": .string("app")])
        try await assertFinished(task)
        let big = (0..<4096).flatMap { _ in (0...255).map { UInt8($0) } }
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(big))
        // An upload: refused, asked, sent again whole with the login, and taken once.
        let source = directory.file("up.txt")
        let body = Self.content(100_000, seed: 90)
        try Data(body).write(to: URL(fileURLWithPath: source))
        let reply = try await call(
            "Upload",
            [
                .string(old.url("/login/up")), .string(source),
                .vardict(["session": .string("app"), "method": .string("PUT"), "protocol": .string("plain")]),
            ])
        let upload = try XCTUnwrap(reply.first?.objectPathValue)
        try await assertFinished(upload)
        XCTAssertEqual(app.questions.map(\.kind), ["http-auth", "http-auth"])
        XCTAssertEqual(app.questions.first?.details["realm"]?.stringValue, "old server")
        let puts = old.log.filter { $0.path == "/login/up" }
        XCTAssertEqual(puts.count, 2)
        XCTAssertEqual(puts.last?.read, body.count, "the answered request carried the whole body")
        XCTAssertEqual(old.log.filter { $0.path == "/login/old.bin" }.count, 2)
    }

    func testAHostileRealmIsCutAndEscapedAndAskedOfTheAppAsText() async throws {
        var route = Route(content: Self.content(20_000, seed: 91))
        route.requiredAuthorization = "Basic " + Data("ivy:pw".utf8).base64EncodedString()
        // Bytes a terminal or a log viewer acts on (an RTL override, a line separator), a quoted
        // quote, and 10,000 more: HTTP lets a field carry them as obs-text.
        let realm = "\u{202E}evil\u{2028}\\\"" + String(repeating: "x", count: 10_000)
        route.authenticate = "Basic realm=\"\(realm)\""
        http.set("/hostile", route)
        let app = try await agent { _ in Self.use(["user": .string("ivy"), "password": .string("pw")]) }
        defer { app.connection.close() }
        let task = try await start(http.url("/hostile"), directory.file("hostile.bin"), ["session": .string("app")])
        try await assertFinished(task)
        let asked = try XCTUnwrap(app.questions.first?.details["realm"]?.stringValue)
        XCTAssertLessThanOrEqual(asked.count, 200, "the realm is cut")
        XCTAssertTrue(asked.hasPrefix("\u{202E}evil\u{2028}\""), "the app gets the text as the server wrote it")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertFalse(log.contains("\u{202E}") || log.contains("\u{2028}"), "the journal gets it escaped")
    }
}
