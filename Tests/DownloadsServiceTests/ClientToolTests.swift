import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The contract through real clients: busctl, gdbus and python3-dbus.
final class ClientToolTests: DaemonTestCase {
    func testBusctlStartWatchesProgressAndFinishes() async throws {
        let content = Self.content(3_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 6_000_000
        http.set("/big", route)
        let out = try await run([
            "busctl", "--address=\(bus.address)", "call", "org.example.Downloads", "/org/example/Downloads",
            "org.example.Downloads", "Start", "ssa{sv}", http.url("/big"), directory.file("big.bin"), "1", "session",
            "s", "cli",
        ])
        XCTAssertEqual(out.status, 0, out.description)
        let pathText = out.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(pathText.hasPrefix("o \"/org/example/Downloads/tasks/"), pathText)
        let path = try ObjectPath(String(pathText.dropFirst(3).dropLast()))
        try await waitState(path, ["finished", "failed"])
        XCTAssertEqual(sha256(ofFile: directory.file("big.bin")), Self.sha256(content))
        let state = try await run([
            "busctl", "--address=\(bus.address)", "get-property", "org.example.Downloads", path.rawValue,
            "org.example.Downloads.Task", "State",
        ])
        XCTAssertEqual(state.stdout.trimmingCharacters(in: .whitespacesAndNewlines), #"s "finished""#)
        try await until("the Finished signal") { self.signalNames(for: path).contains("Finished") }
        let names = signalNames(for: path)
        let progress = signals.withLockedValue { $0 }.filter {
            $0.0 == "Progress" && $0.1.first?.objectPathValue == path
        }
        XCTAssertGreaterThan(progress.count, 1)
        XCTAssertLessThan(progress.count, 40, "throttled to about 10 a second")
        XCTAssertEqual(progress.last?.1[2].int64Value, Int64(content.count), "the last Progress is always sent")
        XCTAssertEqual(progress.map { $0.1[1].int64Value ?? 0 }.reduce(0, +), Int64(content.count), "deltas add up")
        XCTAssertEqual(names.filter { $0 != "Progress" }, ["StateChanged", "StateChanged", "Finished"])
        // EventsFinished follows Finished once the session's idle step ran: waited for.
        try await until("EventsFinished for the session") {
            self.signals.withLockedValue { $0 }.contains { $0.0 == "EventsFinished" && $0.1 == [.string("cli")] }
        }
        // Progress leaves on the task's own queue: none after the state change that ends it
        // (a global flush timer used to send a value it had taken after StateChanged).
        XCTAssertEqual(signalNames(for: path).suffix(2), ["StateChanged", "Finished"])
    }

    func testGdbusPauseResumeCancelAndList() async throws {
        let content = Self.content(2_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        http.set("/f", route)
        let started = try await gdbus("Start", [http.url("/f"), directory.file("f.bin"), "{'session': <'g'>}"])
        XCTAssertEqual(started.status, 0, started.description)
        let path = try ObjectPath(String(started.stdout.split(separator: "'")[1]))
        try await waitBytes(path, atLeast: 100_000)
        let paused = try await gdbus("Pause", [path.rawValue])
        XCTAssertEqual(paused.status, 0, paused.description)
        // gdbus prints the ay: the blob starts with its readable header "org".
        XCTAssertTrue(paused.stdout.hasPrefix("([byte 0x6f, 0x72, 0x67, 0x2e, 0x65, 0x78"), paused.stdout)
        try await waitState(path, ["paused"])
        let list = try await gdbus("ListTasks", ["g"])
        XCTAssertEqual(
            list.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "([objectpath '\(path.rawValue)'],)")
        let none = try await gdbus("ListTasks", ["other"])
        XCTAssertEqual(none.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "(@ao [],)")
        http.update("/f") { $0.bytesPerSecond = nil }
        let resumed = try await gdbus("Resume", [], object: path.rawValue, interface: "org.example.Downloads.Task")
        XCTAssertEqual(resumed.status, 0, resumed.description)
        try await waitState(path, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("f.bin")), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/f").last?.status, 206, "resumed with a range")
        // Cancel on a finished task removes it.
        let removed = try await gdbus("Cancel", [path.rawValue])
        XCTAssertEqual(removed.status, 0, removed.description)
        let gone = try await gdbus("ListTasks", [""])
        XCTAssertEqual(gone.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "(@ao [],)")
    }

    func testPythonPauseCancelThenResumeWithData() async throws {
        let content = Self.content(3_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_500_000
        http.set("/p", route)
        let target = directory.file("p.bin")
        let script = """
            import dbus, time, json
            bus = dbus.bus.BusConnection('\(bus.address)')
            mgr = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            def prop(path, name):
                return bus.get_object('org.example.Downloads', path).Get('org.example.Downloads.Task', name,
                    dbus_interface='org.freedesktop.DBus.Properties')
            path = mgr.Start('\(http.url("/p"))', '\(target)', dbus.Dictionary({'session': 'py', 'priority': 'high'}, signature='sv'))
            while prop(path, 'BytesWritten') < 300000: time.sleep(0.02)
            data = bytes(mgr.Pause(path, byte_arrays=True))
            mgr.Cancel(path)
            state = prop(path, 'State')
            new = mgr.ResumeWithData(dbus.ByteArray(data), dbus.Dictionary({}, signature='sv'))
            while prop(new, 'State') not in ('finished', 'failed'): time.sleep(0.05)
            print(json.dumps({'cancelled_state': str(state), 'new': str(new), 'old': str(path),
                              'final': str(prop(new, 'State')), 'dest': str(prop(new, 'Destination'))}))
            """
        http.update("/p") { _ in }
        let output = try await run(["/usr/bin/python3", "-c", script], timeout: 120)
        XCTAssertEqual(output.status, 0, output.description)
        let result = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: String]
        XCTAssertEqual(result?["cancelled_state"], "cancelled")
        XCTAssertEqual(result?["final"], "finished")
        XCTAssertNotEqual(result?["new"], result?["old"])
        XCTAssertEqual(result?["dest"], target)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
    }

    func testPauseThenResumeWithDataResumesTheSameTask() async throws {
        let content = Self.content(2_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        http.set("/same", route)
        let path = try await start(http.url("/same"), directory.file("same.bin"))
        try await waitBytes(path, atLeast: 200_000)
        let paused = try await call("Pause", [.objectPath(path)])
        let data = try XCTUnwrap(paused.first?.bytesValue)
        http.update("/same") { $0.bytesPerSecond = nil }
        let again = try await call("ResumeWithData", [.bytes(data), .vardict([:])])
        XCTAssertEqual(again, [.objectPath(path)])
        try await waitState(path, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("same.bin")), Self.sha256(content))
        let requests = http.requests(for: "/same")
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(requests.last?.status, 206)
    }

    func testEveryBadInputGetsItsErrorAndTheDaemonKeepsRunning() async throws {
        http.set("/ok", Route(content: Self.content(100)))
        func expect(
            _ name: String, _ method: String, _ args: [String], object: String = "/org/example/Downloads",
            interface: String = "org.example.Downloads", file: StaticString = #filePath, line: UInt = #line
        ) async throws {
            let output = try await gdbus(method, args, object: object, interface: interface)
            XCTAssertNotEqual(output.status, 0, file: file, line: line)
            XCTAssertTrue(
                output.stderr.contains("GDBus.Error:\(name):"), "\(method) \(args): \(output.stderr)", file: file,
                line: line)
        }
        let invalid = "org.example.Downloads.Error.InvalidArgument"
        try await expect(invalid, "Start", ["file:///etc/passwd", "/tmp/x", "{}"])
        try await expect(invalid, "Start", ["not a url", "/tmp/x", "{}"])
        try await expect(invalid, "Start", [http.url("/ok"), "relative/path", "{}"])
        try await expect(invalid, "Start", [http.url("/ok"), "/tmp/../etc/x", "{}"])
        try await expect(invalid, "Start", [http.url("/ok"), "/no/such/dir/file", "{}"])
        try await expect(invalid, "Start", [http.url("/ok"), directory.file("a"), "{'bogus': <1>}"])
        try await expect(invalid, "Start", [http.url("/ok"), directory.file("a"), "{'session': <1>}"])
        try await expect(invalid, "Start", [http.url("/ok"), directory.file("a"), "{'priority': <'urgent'>}"])
        try await expect(invalid, "Start", [http.url("/ok"), directory.file("a"), "{'sha256': <'xyz'>}"])
        try await expect(
            invalid, "Start", [http.url("/ok"), directory.file("a"), "{'headers': <{'X-A': 'b\\r\\nc'}>}"])
        try await expect(
            invalid, "Start", [http.url("/ok"), directory.file("a"), "{'max_bytes_per_second': <'fast'>}"])
        try await expect("org.freedesktop.DBus.Error.InvalidArgs", "Start", [http.url("/ok"), directory.file("a")])
        try await expect("org.example.Downloads.Error.InvalidResumeData", "ResumeWithData", ["b'forged'", "{}"])
        try await expect(
            "org.example.Downloads.Error.InvalidResumeData", "ResumeWithData",
            ["b'org.example.Downloads.ResumeData/1\\n{}\\nhmac-sha256:00'", "{}"])
        try await expect("org.example.Downloads.Error.NotFound", "Pause", ["/org/example/Downloads/tasks/999"])
        try await expect("org.example.Downloads.Error.NotFound", "Resume", ["/org/example/Downloads"])
        XCTAssertTrue(FileManager.default.createFile(atPath: directory.file("exists"), contents: Data("x".utf8)))
        try await expect(
            "org.example.Downloads.Error.FileExists", "Start", [http.url("/ok"), directory.file("exists"), "{}"])
        try await expect(invalid, "RegisterCompletionHandler", ["s", "/app", "{'nope': <1>}"])
        try await expect(
            "org.example.Downloads.Error.AccessDenied", "RegisterCompletionHandler",
            ["s", "/app", "{'bus_name': <'org.example.NotMine'>}"])
        // WrongState: resuming a finished task.
        let path = try await start(http.url("/ok"), directory.file("ok.bin"))
        try await waitState(path, ["finished"])
        try await expect("org.example.Downloads.Error.WrongState", "Resume", [path.rawValue])
        try await expect(
            "org.example.Downloads.Error.WrongState", "Pause", [], object: path.rawValue,
            interface: "org.example.Downloads.Task")
        // Still serving.
        let list = try await call("ListTasks", [.string("")])
        XCTAssertEqual(list, [.objectPaths([path])])
    }

    func testIntrospectionMatchesTheShippedXML() async throws {
        let root = DaemonTestCase.packageRoot
        http.set("/i", Route(content: [1, 2, 3]))
        let task = try await start(http.url("/i"), directory.file("i"))
        let group = try await call(
            "StartGroup",
            [
                .array(
                    element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                    [.structure([.string(http.url("/i")), .string(directory.file("gi")), .vardict([:])])]),
                .vardict([:]),
            ]
        ).first?.objectPathValue
        let objects = [
            ("/org/example/Downloads", "org.example.Downloads"), (task.rawValue, "org.example.Downloads.Task"),
            (try XCTUnwrap(group).rawValue, "org.example.Downloads.Group"),
        ]
        for (object, interface) in objects {
            let shipped = try String(contentsOf: root.appendingPathComponent("dbus/\(interface).xml"), encoding: .utf8)
            let live = try await run([
                "gdbus", "introspect", "--address", bus.address, "--dest", "org.example.Downloads", "--object-path",
                object, "--xml",
            ])
            // The <interface> element of the shipped file appears verbatim in what the daemon exports.
            let start = try XCTUnwrap(shipped.range(of: "  <interface"))
            let end = try XCTUnwrap(shipped.range(of: "</interface>", options: .backwards))
            let element = String(shipped[start.lowerBound..<end.upperBound])
            XCTAssertTrue(
                live.stdout.contains(element), "\(interface) drifted from dbus/\(interface).xml:\n\(live.stdout)")
        }
    }
}
