import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `--exit-idle-time` with D-Bus activation, as a desktop runs the daemon: it exits once nothing
/// is left to do, the next call starts it again with everything it had, and a call that comes
/// while it leaves is answered (by it before the name is released, by the next instance after).
final class IdleExitTests: DaemonTestCase {
    private var log: String { (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "" }

    private func occurrences(_ text: String) -> Int { log.components(separatedBy: text).count - 1 }

    /// A call to the manager; the reply's values and which connection sent it.
    private func callAnswered(_ method: String, _ arguments: [DBusValue]) async throws -> ([DBusValue], String?) {
        let message = try Message.methodCall(
            destination: "org.example.Downloads", path: "/org/example/Downloads", interface: "org.example.Downloads",
            member: method
        )
        try message.append(arguments)
        let reply = try await client.call(message)
        return (try reply.arguments(), reply.sender)
    }

    func testExitsWhenIdleAndTheNextCallStartsItAgainWithTheFinishedTask() async throws {
        try switchToActivation(exitIdleTime: 1)
        let content = Self.content(1_500_000, seed: 3)
        var slow = Route(content: content)
        slow.bytesPerSecond = 500_000  // three seconds: longer than the idle time
        http.set("/a.bin", slow)
        let target = directory.file("a.bin")
        let task = try await start(http.url("/a.bin"), target)
        XCTAssertEqual(activations.count, 1, "the Start activated the daemon")
        let first = activations[0]
        try await waitBytes(task, atLeast: 1)
        // Nobody calls while it downloads: the running task keeps the daemon.
        let ended = Date().addingTimeInterval(30)
        while try await client.nameOwner("org.example.Downloads") != nil,
            !FileManager.default.fileExists(atPath: target), Date() < ended
        {
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: target), "the download finished before the daemon left")
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        try await waitUntilTheDaemonExits()
        XCTAssertFalse(Self.isRunning(first))
        XCTAssertEqual(occurrences("idle for 1 s (--exit-idle-time): leaving the bus"), 1, log)
        XCTAssertEqual(occurrences("stopped ("), 1, log)
        // The write-ahead log was moved into the database at the exit.
        let wal =
            (try? FileManager.default.attributesOfItem(atPath: stateDirectory + "/downloads.sqlite-wal")[.size] as? Int)
            ?? 0
        XCTAssertEqual(wal, 0, "the write-ahead log was checkpointed at the exit")
        // A signal subscriber (this test's client) kept nothing; the next call starts it again.
        let (listed, sender) = try await callAnswered("ListTasks", [.string("")])
        XCTAssertEqual(listed.first?.objectPathArrayValue, [task])
        XCTAssertEqual(activations.count, 2)
        XCTAssertNotNil(sender)
        let state = try await property(task, "State")?.stringValue
        XCTAssertEqual(state, "finished")
        let written = try await property(task, "BytesWritten")?.int64Value
        XCTAssertEqual(written, Int64(content.count))
        XCTAssertTrue(signalNames(for: task).contains("Finished"), "\(signalNames(for: task))")
    }

    func testACallWhileTheDaemonLeavesIsAnsweredAndNothingIsLost() async throws {
        // Debug builds widen the moment before the name is released and the one after it.
        try switchToActivation(exitIdleTime: 1, environment: ["DOWNLOADSD_TEST_LEAVING_DELAY_MS": "2500"])
        let (_, firstSender) = try await callAnswered("ListTasks", [.string("")])
        XCTAssertEqual(activations.count, 1)

        // Before the release: this instance answers, takes the work, and stays.
        try await until("the daemon starts to leave") { self.occurrences("leaving the bus") == 1 }
        let content = Self.content(800_000, seed: 5)
        var slow = Route(content: content)
        slow.bytesPerSecond = 200_000  // four seconds: still running when the delay ends
        http.set("/late.bin", slow)
        let target = directory.file("late.bin")
        let (started, startSender) = try await callAnswered(
            "Start", [.string(http.url("/late.bin")), .string(target), .vardict([:])])
        let task = try XCTUnwrap(started.first?.objectPathValue)
        XCTAssertEqual(startSender, firstSender)
        try await until("the daemon stays for the work") {
            self.log.contains("a call gave work before the name was released: staying")
        }
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(activations.count, 1)

        // After the release: the call waits at the bus, and the next instance answers it once
        // this one is gone (it waits for the state directory's lock).
        try await until("the daemon leaves again") { self.occurrences("leaving the bus") == 2 }
        try await until("the name released") { try await self.client.nameOwner("org.example.Downloads") == nil }
        XCTAssertTrue(Self.isRunning(activations[0]), "the first instance is still finishing")
        let (listed, laterSender) = try await callAnswered("ListTasks", [.string("")])
        XCTAssertNotEqual(laterSender, firstSender)
        XCTAssertEqual(listed.first?.objectPathArrayValue, [task])
        XCTAssertEqual(activations.count, 2)
        XCTAssertFalse(Self.isRunning(activations[0]))
        XCTAssertTrue(log.contains("for the previous instance to leave"), log)
        let state = try await property(task, "State")?.stringValue
        XCTAssertEqual(state, "finished")
    }

    func testAPendingCompletionCallKeepsTheDaemonUntilItIsAnswered() async throws {
        try switchToActivation(exitIdleTime: 1)
        let marker = directory.file("called.txt")
        let script = directory.file("slow-app.py")
        // The app answers the completion call three seconds after it came: longer than the idle time.
        try """
        import dbus, dbus.service, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.bus.BusConnection('\(bus.address)')
        class App(dbus.service.Object):
            @dbus.service.method('org.example.Downloads.Client', in_signature='s', out_signature='', async_callbacks=('ok', 'err'))
            def HandleEventsForBackgroundSession(self, session, ok, err):
                open('\(marker)', 'a').write(session + '\\n')
                def answer():
                    ok()
                    open('\(marker)', 'a').write('answered\\n')
                    return False
                GLib.timeout_add(3000, answer)
        app = App(bus, '/org/example/SlowApp')
        manager = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
        manager.RegisterCompletionHandler('app', '/org/example/SlowApp', dbus.Dictionary({}, signature='sv'))
        open('\(marker)', 'a').write('registered\\n')
        GLib.MainLoop().run()
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let app = try ChildProcess(["/usr/bin/python3", script], environment: bus.environment)
        defer { app.stop() }
        try await until("the app registered") {
            (try? String(contentsOfFile: marker, encoding: .utf8))?.contains("registered") == true
        }
        http.set("/c.bin", Route(content: Self.content(10_000)))
        let task = try await start(http.url("/c.bin"), directory.file("c.bin"), ["session": .string("app")])
        try await waitState(task, ["finished"])
        try await waitUntilTheDaemonExits()
        XCTAssertEqual(activations.count, 1)
        XCTAssertEqual(try String(contentsOfFile: marker, encoding: .utf8), "registered\napp\nanswered\n")
        let called = try XCTUnwrap(log.range(of: "completion handler of session 'app'")?.lowerBound, log)
        let leaving = try XCTUnwrap(log.range(of: "leaving the bus")?.lowerBound, log)
        XCTAssertLessThan(called, leaving, "the daemon left only after the call was answered")
        XCTAssertTrue(log.contains("completion handler of session 'app' of uid \(getuid()) called"), log)
    }

    /// `downloadsctl watch` calls nothing while no task is active, so the daemon still exits, and
    /// it follows the next instance when a call from elsewhere starts it.
    func testWatchFollowsTheServiceAcrossAnIdleExitAndAnActivation() async throws {
        try switchToActivation(exitIdleTime: 1)
        var slow = Route(content: Self.content(300_000, seed: 1))
        slow.bytesPerSecond = 300_000
        http.set("/one.bin", slow)
        http.set("/two.bin", slow)
        _ = try await start(http.url("/one.bin"), directory.file("one.bin"))
        let watch = try ChildProcess([PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "watch"])
        defer { watch.stop() }
        let output = OutputCollector(watch.stdout)
        try await until("watch shows the first task finished") { output.text.contains("task 1 finished") }
        try await waitUntilTheDaemonExits()
        XCTAssertTrue(Self.isRunning(watch.pid), "watch keeps running without the service")
        XCTAssertEqual(activations.count, 1, "watch did not keep the daemon or start it again")
        _ = try await start(http.url("/two.bin"), directory.file("two.bin"))
        try await until("watch shows the second task, from the next instance") {
            output.text.contains("task 2 finished")
        }
        XCTAssertEqual(activations.count, 2)
        watch.signal(SIGINT)
        XCTAssertEqual(watch.wait(), 0)
    }
}
