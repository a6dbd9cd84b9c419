import DBus
import NIOConcurrencyHelpers
import DownloadsAPI
import Foundation
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// What reshaping the core fixed, through D-Bus against the service in process.
final class ResumeAndOwnershipTests: InProcessServiceTestCase {
    func slowRoute(_ size: Int) -> (Route, [UInt8]) {
        let content = TestData.content(size)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        return (route, content)
    }

    func pauseBlob(_ path: ObjectPath) async throws -> [UInt8] {
        let reply = try await call("Pause", [.objectPath(path)])
        return try XCTUnwrap(reply.first?.bytesValue)
    }

    func testResumeWithDataAfterCancelKeepsTheSession() async throws {
        let (route, content) = slowRoute(800_000)
        http.set("/photo", route)
        var options = TaskOptions()
        options.session = "photos"
        let first = try await start(http.url("/photo"), directory.file("photo.jpg"), options)
        try await waitBytes(first, atLeast: 100_000)
        let blob = try await pauseBlob(first)
        _ = try await call("Cancel", [.objectPath(first)])
        http.update("/photo") { $0.bytesPerSecond = nil }

        let reply = try await call("ResumeWithData", [.bytes(blob), .vardict([:])])
        let second = try XCTUnwrap(reply.first?.objectPathValue)
        XCTAssertNotEqual(second, first, "the cancelled task is gone; a new one takes over")
        let session = try await property(second, .session)
        XCTAssertEqual(session, .string("photos"), "the Session property holds the plain name")
        let listed = try await call("ListTasks", [.string("photos")])
        XCTAssertEqual(listed.first?.objectPathArrayValue?.contains(second), true, "ListTasks(\"photos\") finds it")
        try await waitState(second, [.finished])
        XCTAssertEqual(TestData.sha256(ofFile: directory.file("photo.jpg")), TestData.sha256(content))
        try await waitSignal { $0 == .eventsFinished(session: "photos") }
        let description = try Self.description(of: blob)
        XCTAssertEqual(description["session"] as? String, "photos", "the blob holds the plain session name")
        XCTAssertEqual(description["owner_uid"] as? Int, Int(getuid()), "and binds its owner")
    }

    func testResumeWithDataOptionsApplyToAPausedTask() async throws {
        let (route, content) = slowRoute(600_000)
        http.set("/opts", route)
        let path = try await start(http.url("/opts"), directory.file("opts.bin"))
        try await waitBytes(path, atLeast: 50_000)
        let blob = try await pauseBlob(path)
        var change = TaskOptions()
        change.priority = .high
        change.maxBytesPerSecond = 4_242_424
        let reply = try await call("ResumeWithData", [.bytes(blob), .vardict(change.dictionary)])
        XCTAssertEqual(reply.first?.objectPathValue, path, "the paused task itself carries on")
        let again = try await pauseBlob(path)
        let options = try XCTUnwrap(try Self.description(of: again)["options"] as? [String: Any])
        XCTAssertEqual(options["priority"] as? String, "high")
        XCTAssertEqual(options["max_bytes_per_second"] as? Int, 4_242_424)
        let stored = try await DatabaseQueue(path: databasePath).read { db in
            try String.fetchOne(
                db, sql: "SELECT options FROM task WHERE id = ?", arguments: [DownloadsAPI.taskID(path)])
        }
        XCTAssertEqual(stored, #"{"max_bytes_per_second":4242424,"priority":"high"}"#, "the store has them too")
        http.update("/opts") { $0.bytesPerSecond = nil }
        _ = try await call("Resume", [.objectPath(path)])
        try await waitState(path, [.finished])
        XCTAssertEqual(TestData.sha256(ofFile: directory.file("opts.bin")), TestData.sha256(content))
    }

    func testAFailureBeforeTheFirstByteLeavesNothingBehind() async throws {
        var missing = Route(content: [])
        missing.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/nope", missing)
        let folder = directory.file("incoming")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = try await start(http.url("/nope"), folder)
        try await waitState(path, [.failed])
        let error = try await property(path, .error)
        XCTAssertEqual(error, .string(DownloadsErrorName.httpError.fullName))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), [], "no hidden partial file")
    }

    func testAnUnreadableRowDoesNotStopTheServiceFromStarting() async throws {
        let (route, _) = slowRoute(400_000)
        http.set("/a", route)
        let a = try await start(http.url("/a"), directory.file("a.bin"))
        let b = try await start(http.url("/a"), directory.file("b.bin"))
        for path in [a, b] { _ = try await call("Pause", [.objectPath(path)]) }
        await stopService()
        try await DatabaseQueue(path: databasePath).write { db in
            try db.execute(sql: "UPDATE task SET options = 'garbage' WHERE id = ?", arguments: [DownloadsAPI.taskID(a)])
        }
        try await startService()
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertEqual(listed.first?.objectPathArrayValue, [b], "the readable task is served")
        let state = try await property(b, .state)
        XCTAssertEqual(state, .string("paused"))
        let kept = try await DatabaseQueue(path: databasePath).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM task")
        }
        XCTAssertEqual(kept, 2, "the unreadable row is kept aside, not deleted")
    }

    func testSessionsPerUserAreLimited() async throws {
        await stopService()
        serviceConfiguration.maxSessionsPerUser = 2
        try await startService()
        http.set("/s", Route(content: TestData.content(100)))
        for (index, name) in ["a", "b", "a"].enumerated() {
            var options = TaskOptions()
            options.session = name
            _ = try await start(http.url("/s"), directory.file("s\(index)"), options)
        }
        var third = TaskOptions()
        third.session = "c"
        do {
            _ = try await start(http.url("/s"), directory.file("c"), third)
            XCTFail("a third session was accepted")
        } catch let error as BusError {
            XCTAssertEqual(error.name, DownloadsErrorName.quotaExceeded.fullName)
            XCTAssertTrue(error.message.contains("2 sessions"), error.message)
        }
    }

    /// A new task's `InterfacesAdded` carries every property of the task as it was created, the
    /// same names and (for those that do not change) the same values `GetAll` answers.
    func testInterfacesAddedCarriesEveryPropertyOfTheNewTask() async throws {
        let added = NIOLockedValueBox([(ObjectPath, [String: DBusValue])]())
        try await client.subscribe(
            MatchRule(interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
        ) { message in
            guard let arguments = try? message.arguments(), arguments.count == 2,
                let path = arguments[0].objectPathValue,
                case .dictionary(_, _, let interfaces) = arguments[1]
            else { return }
            for entry in interfaces where entry.key.stringValue == DownloadsInterfaces.task.name {
                added.withLockedValue { $0.append((path, entry.value.vardictValue ?? [:])) }
            }
        }
        let (route, _) = slowRoute(400_000)
        http.set("/added", route)
        var options = TaskOptions()
        options.title = "Added <b>x</b>"
        let path = try await start(http.url("/added"), directory.file("added.bin"), options)
        let deadline = Date() + 20
        while !added.withLockedValue({ $0.contains { $0.0 == path } }), Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let announced = added.withLockedValue { $0.first { $0.0 == path }?.1 } ?? [:]
        let all =
            try await client.call(
                destination: DownloadsAPI.busName, path: path, interface: "org.freedesktop.DBus.Properties",
                method: "GetAll",
                arguments: [.string(DownloadsInterfaces.task.name)]
            ).first?.vardictValue ?? [:]
        XCTAssertEqual(Set(announced.keys), Set(all.keys))
        XCTAssertEqual(announced.count, TaskProperty.allCases.count)
        for property in TaskProperty.allCases where property.isConstant {
            XCTAssertEqual(announced[property.name], all[property.name], property.name)
        }
        XCTAssertEqual(announced["State"], .string("queued"), "the values of the moment it was created")
        XCTAssertEqual(announced["Title"], .string("Added <b>x</b>"))
        _ = try await call("Cancel", [.objectPath(path)])
    }

    func testTasksAreServedFromOneSubtree() async throws {
        let (route, _) = slowRoute(400_000)
        http.set("/t", route)
        let path = try await start(http.url("/t"), directory.file("t.bin"))
        _ = try await call("Pause", [.objectPath(path)])
        let xml =
            try await client.call(
                destination: DownloadsAPI.busName, path: DownloadsAPI.tasksPath,
                interface: "org.freedesktop.DBus.Introspectable",
                method: "Introspect"
            ).first?.stringValue ?? ""
        XCTAssertTrue(xml.contains("<node name=\"\(DownloadsAPI.taskID(path) ?? 0)\"/>"), xml)
        let managed = try await client.call(
            destination: DownloadsAPI.busName, path: DownloadsAPI.managerPath,
            interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects"
        )
        guard case .dictionary(_, _, let entries)? = managed.first else {
            return XCTFail("GetManagedObjects: \(managed)")
        }
        let objects = entries.compactMap { $0.key.objectPathValue }
        XCTAssertEqual(objects, [path])
        do {
            _ = try await client.call(
                destination: DownloadsAPI.busName, path: DownloadsAPI.taskPath(999_999),
                interface: DownloadsInterfaces.task.name,
                method: "Pause"
            )
            XCTFail("a missing task answered")
        } catch let error as BusError {
            XCTAssertEqual(error.name, DownloadsErrorName.notFound.fullName)
        }
    }
}
