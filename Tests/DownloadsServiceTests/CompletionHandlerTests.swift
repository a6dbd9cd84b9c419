import DBus
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// HandleEventsForBackgroundSession: once per transition, never early, durable, activatable.
final class CompletionHandlerTests: DaemonTestCase {
    /// An app object implementing org.example.Downloads.Client on its own connection.
    final class App: Sendable {
        let connection: Connection
        let calls = NIOLockedValueBox([String]())

        init(connection: Connection) throws {
            self.connection = connection
            let interface = InterfaceDescription(
                "org.example.Downloads.Client",
                methods: [.init("HandleEventsForBackgroundSession", in: [.init("session", .string)])]
            )
            try connection.export(
                ExportedObject(
                    path: "/app",
                    interfaces: [
                        ExportedInterface(
                            interface,
                            methods: [
                                "HandleEventsForBackgroundSession": { [calls] call in
                                    calls.withLockedValue { $0.append(call.arguments[0].stringValue ?? "") }
                                    return []
                                }
                            ])
                    ]))
        }

        func register(_ session: String, daemonCall: (String, [DBusValue]) async throws -> [DBusValue]) async throws {
            _ = try await connection.call(
                destination: "org.example.Downloads", path: "/org/example/Downloads",
                interface: "org.example.Downloads",
                method: "RegisterCompletionHandler", arguments: [.string(session), .objectPath("/app"), .vardict([:])]
            )
        }
    }

    func makeApp() async throws -> App {
        try App(connection: try await Connection.open(.address(bus.address)))
    }

    func waitFor(_ condition: @Sendable () -> Bool, seconds: Double = 30) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline && !condition() { try await Task.sleep(for: .milliseconds(20)) }
    }

    func testCalledOnceAfterTheLastTaskAndNotBefore() async throws {
        let app = try await makeApp()
        defer { app.connection.close() }
        try await app.register("bg") { try await self.call($0, $1) }
        var slow = Route(content: Self.content(600_000))
        slow.bytesPerSecond = 1_000_000
        http.set("/slow", slow)
        http.set("/fast", Route(content: Self.content(1000)))
        // The slow one first: the session stays busy until it ends, whatever the machine's load.
        let b = try await start(http.url("/slow"), directory.file("b"), ["session": .string("bg")])
        let a = try await start(http.url("/fast"), directory.file("a"), ["session": .string("bg")])
        try await waitState(a, ["finished"])
        XCTAssertEqual(app.calls.withLockedValue { $0 }, [], "a task of the session is still running")
        try await waitState(b, ["finished"])
        try await waitFor { app.calls.withLockedValue { $0.count } >= 1 }
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(app.calls.withLockedValue { $0 }, ["bg"], "exactly one call")
        // A second round makes a second transition and a second call.
        let c = try await start(http.url("/fast"), directory.file("c"), ["session": .string("bg")])
        try await waitState(c, ["finished"])
        try await waitFor { app.calls.withLockedValue { $0.count } >= 2 }
        XCTAssertEqual(app.calls.withLockedValue { $0 }, ["bg", "bg"])
    }

    func testPendingAcrossClientExitAndDaemonRestart() async throws {
        let app = try await makeApp()
        try await app.register("later") { try await self.call($0, $1) }
        app.connection.close()
        http.set("/x", Route(content: Self.content(5000)))
        let task = try await start(http.url("/x"), directory.file("x"), ["session": .string("later")])
        try await waitState(task, ["finished"])
        // The call is pending (stored) once EventsFinished went out.
        try await until("EventsFinished") {
            self.signals.withLockedValue { $0 }.contains { $0.0 == "EventsFinished" && $0.1.first == .string("later") }
        }
        stopDaemon()
        try await startDaemon()
        let again = try await makeApp()
        defer { again.connection.close() }
        try await again.register("later") { try await self.call($0, $1) }
        try await waitFor { again.calls.withLockedValue { $0.count } >= 1 }
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(again.calls.withLockedValue { $0 }, ["later"])
        // Delivered: registering once more does not call again.
        let third = try await makeApp()
        defer { third.connection.close() }
        try await third.register("later") { try await self.call($0, $1) }
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(third.calls.withLockedValue { $0 }, [])
    }

    func testActivatableClientIsLaunchedToReceiveTheCall() async throws {
        let marker = directory.file("activated.txt")
        let script = directory.file("app.py")
        try """
        import dbus, dbus.service, dbus.mainloop.glib, sys
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()
        name = dbus.service.BusName('org.example.TestApp', bus)
        class App(dbus.service.Object):
            @dbus.service.method('org.example.Downloads.Client', in_signature='s', out_signature='')
            def HandleEventsForBackgroundSession(self, session):
                open('\(marker)', 'a').write(session + '\\n')
                GLib.timeout_add(200, loop.quit)
        app = App(bus, '/org/example/TestApp')
        if len(sys.argv) > 1:
            iface = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            iface.RegisterCompletionHandler('app', '/org/example/TestApp', {'bus_name': 'org.example.TestApp'})
            sys.exit(0)
        loop = GLib.MainLoop(); loop.run()
        """.write(toFile: script, atomically: true, encoding: .utf8)
        try """
        [D-BUS Service]
        Name=org.example.TestApp
        Exec=/usr/bin/python3 \(script)
        """.write(toFile: bus.servicesDirectory + "/org.example.TestApp.service", atomically: true, encoding: .utf8)
        // The app registers with its well-known name, then quits.
        let registered = try await run(["/usr/bin/python3", script, "register"])
        XCTAssertEqual(registered.status, 0, registered.description)
        http.set("/y", Route(content: Self.content(5000)))
        let task = try await start(http.url("/y"), directory.file("y"), ["session": .string("app")])
        try await waitState(task, ["finished"])
        // The app creates the marker before it writes the line: wait for the line, not the file.
        try await waitFor { (try? String(contentsOfFile: marker, encoding: .utf8))?.hasSuffix("\n") == true }
        XCTAssertEqual(try String(contentsOfFile: marker, encoding: .utf8), "app\n")
    }
}
