import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The service's own calls to clients are its pending replies, and the system bus lets one
/// connection wait for 128: the fourth trust round's second finding. On a private system-type
/// bus with the shipped policy and two real users, user a's handler never answers the questions
/// of 140 tasks (each meets a 401 of another realm, `challenge_timeout` 3600); user b's question
/// and completion call still go through, and a's calls in flight stay at its cap.
final class ClientCallLimitTests: TwoUsersTestCase {
    override var extraArguments: [String] { ["--max-tasks-per-user", "200"] }

    func testOneUsersUnansweredQuestionsLeaveAnotherUsersCallsTheirSlots() async throws {
        let aHome = try home("a", users.a)
        let bHome = try home("b", users.b)
        for index in 0..<140 {
            var route = Route(content: Self.content(1000))
            route.requiredAuthorization = "Basic " + Data("ann:right".utf8).base64EncodedString()
            route.authenticate = "Basic realm=\"r\(index)\""
            http.set("/realm\(index)", route)
        }
        let bContent = Self.content(30_000, seed: 5)
        var bRoute = Route(content: bContent)
        bRoute.requiredAuthorization = "Basic " + Data("bee:right".utf8).base64EncodedString()
        http.set("/bee", bRoute)
        // a: a handler that takes every question and never answers, and 140 tasks that ask.
        let asked = aHome + "/asked"
        let aHandler = try pythonProcess(
            as: users.a,
            """
            import dbus, dbus.service, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.bus.BusConnection('\(bus.address)')
            held = []
            class App(dbus.service.Object):
                @dbus.service.method('org.example.Downloads.Client', in_signature='s')
                def HandleEventsForBackgroundSession(self, session):
                    pass
                @dbus.service.method('org.example.Downloads.Client', in_signature='osa{sv}', out_signature='sa{sv}',
                                     async_callbacks=('reply', 'error'))
                def HandleChallenge(self, task, kind, details, reply, error):
                    held.append(reply)
                    open('\(asked)', 'w').write(str(len(held)))
            app = App(bus, '/app')
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            m.RegisterCompletionHandler('bg', '/app', dbus.Dictionary({
                'challenges': dbus.Array(['http-auth'], signature='s'),
                'challenge_timeout': dbus.UInt32(3600)}, signature='sv'))
            for i in range(140):
                m.Start('\(http.url("/realm"))%d' % i, '\(aHome)/f%d' % i, dbus.Dictionary({'session': 'bg'}, signature='sv'))
            open('\(aHome)/started', 'w').write('140')
            loop = GLib.MainLoop()
            GLib.timeout_add(120000, loop.quit)
            loop.run()
            """)
        defer { aHandler.stop() }
        func askedOfA() -> Int { Int((try? String(contentsOfFile: asked, encoding: .utf8)) ?? "") ?? 0 }
        try await until("a's 140 tasks started and its handler asked", seconds: 60) {
            FileManager.default.fileExists(atPath: aHome + "/started") && askedOfA() >= 12
        }
        // b: one task that meets a login its handler answers, then b's completion call.
        let b = try await python(
            uid: users.b.uid, gid: users.b.gid, setprivGroups: "--init-groups",
            """
            import dbus.service, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            app_bus = dbus.bus.BusConnection('\(bus.address)')
            loop = GLib.MainLoop()
            out['asked'] = 0
            out['completed'] = False
            class App(dbus.service.Object):
                @dbus.service.method('org.example.Downloads.Client', in_signature='s')
                def HandleEventsForBackgroundSession(self, session):
                    out['completed'] = True
                    loop.quit()
                @dbus.service.method('org.example.Downloads.Client', in_signature='osa{sv}', out_signature='sa{sv}')
                def HandleChallenge(self, task, kind, details):
                    out['asked'] += 1
                    return ('use', {'user': 'bee', 'password': 'right'})
            app = App(app_bus, '/app')
            manager = dbus.Interface(app_bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            manager.RegisterCompletionHandler('bg', '/app', dbus.Dictionary({'challenges': dbus.Array(['http-auth'], signature='s')}, signature='sv'))
            task = manager.Start('\(http.url("/bee"))', '\(bHome)/bee', dbus.Dictionary({'session': 'bg'}, signature='sv'))
            GLib.timeout_add(40000, loop.quit)
            loop.run()
            out['state'] = str(app_bus.get_object('org.example.Downloads', task).Get('org.example.Downloads.Task', 'State', dbus_interface='org.freedesktop.DBus.Properties'))
            """)
        XCTAssertEqual(b["asked"] as? Int, 1, "b's question reached b's handler: \(b)")
        XCTAssertEqual(b["state"] as? String, "finished", "\(b)")
        XCTAssertEqual(b["completed"] as? Bool, true, "b's completion call went through: \(b)")
        XCTAssertEqual(sha256(ofFile: bHome + "/bee"), Self.sha256(bContent))
        XCTAssertLessThanOrEqual(askedOfA(), 12, "a's calls in flight stay at its cap")
        let log = (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? ""
        XCTAssertFalse(log.contains("LimitsExceeded"), "the bus never refused a call")
    }
}
