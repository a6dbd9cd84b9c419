import DBus
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// A task's `Update`: a new bandwidth limit taken by the running transfer (its speed, as the
/// service's `Speed` and the bytes written say, before and after), a new priority deciding which
/// queued task starts next, new headers sent after a 401, texts with their `PropertiesChanged`,
/// all kept through a restart; keys that may not change, and bad values, refused by name.
final class UpdateTests: DaemonTestCase {
    func update(_ task: ObjectPath, _ options: [String: DBusValue]) async throws {
        _ = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: "Update",
            arguments: [.vardict(options)]
        )
    }

    /// The task's `PropertiesChanged`, each one's changed properties, as they come.
    func watchProperties(_ task: ObjectPath) async throws -> NIOLockedValueBox<[[String: DBusValue]]> {
        let seen = NIOLockedValueBox([[String: DBusValue]]())
        try await client.subscribe(
            MatchRule(
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: task
            )
        ) { message in
            guard let arguments = try? message.arguments(), arguments.count > 1, let changed = arguments[1].vardictValue
            else { return }
            seen.withLockedValue { $0.append(changed) }
        }
        return seen
    }

    /// Bytes written over `seconds`, a second's worth.
    func rate(_ task: ObjectPath, over seconds: Double) async throws -> Double {
        let before = try await property(task, "BytesWritten")?.int64Value ?? 0
        let start = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        let after = try await property(task, "BytesWritten")?.int64Value ?? 0
        let elapsed = ContinuousClock.now - start
        return Double(after - before)
            / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    func testANewLimitIsTakenByTheRunningTransferAndSpeedShowsIt() async throws {
        let content = Self.content(12_000_000, seed: 301)
        http.set("/big", Route(content: content))
        let task = try await start(
            http.url("/big"), directory.file("big.bin"), ["max_bytes_per_second": .uint64(300_000)])
        try await waitBytes(task, atLeast: 200_000)
        let slow = try await rate(task, over: 1.5)
        let speed = try await property(task, "Speed")?.uint64Value ?? 0
        XCTAssertGreaterThan(speed, 100_000, "Speed while limited to 300 kB/s: \(speed)")
        XCTAssertLessThan(speed, 900_000, "Speed while limited to 300 kB/s: \(speed)")
        let changes = try await watchProperties(task)
        try await update(task, ["max_bytes_per_second": .uint64(3_000_000)])
        let limit = try await property(task, "MaxBytesPerSecond")
        XCTAssertEqual(limit?.uint64Value, 3_000_000)
        try await until("the PropertiesChanged of the limit") {
            changes.withLockedValue { $0 }.contains { $0["MaxBytesPerSecond"]?.uint64Value == 3_000_000 }
        }
        try await until("Speed in the PropertiesChanged of progress") {
            changes.withLockedValue { $0 }.contains { ($0["Speed"]?.uint64Value ?? 0) > 0 }
        }
        let fast = try await rate(task, over: 1.5)
        XCTAssertGreaterThan(fast, slow * 3, "the new limit is taken at once: \(slow) → \(fast) bytes/s")
        try await waitState(task, ["finished"], seconds: 60)
        let after = try await property(task, "Speed")
        XCTAssertEqual(after?.uint64Value, 0, "no speed once it ended")
        XCTAssertEqual(sha256(ofFile: directory.file("big.bin")), Self.sha256(content))
    }

    func testANewPriorityDecidesWhichQueuedTaskStartsNext() async throws {
        var slow = Route(content: Self.content(3_000_000, seed: 302))
        slow.bytesPerSecond = 1_000_000
        http.set("/slow", slow)
        // A session runs two transfers at once: the third and fourth wait.
        var tasks: [ObjectPath] = []
        for name in ["a", "b", "c", "d"] {
            tasks.append(try await start(http.url("/slow"), directory.file(name), ["session": .string("order")]))
        }
        try await waitState(tasks[0], ["running"])
        try await waitState(tasks[1], ["running"])
        try await update(tasks[3], ["priority": .string("high")])
        let priority = try await property(tasks[3], "Priority")
        XCTAssertEqual(priority?.stringValue, "high")
        _ = try await call("Pause", [.objectPath(tasks[0])])
        try await waitState(tasks[3], ["running", "finished"])
        let third = try await property(tasks[2], "State")
        XCTAssertEqual(third?.stringValue, "queued", "the high-priority task went first")
        for task in tasks { _ = try? await call("Cancel", [.objectPath(task)]) }
    }

    func testNewHeadersAreSentAfterA401AndEverythingIsKeptThroughARestart() async throws {
        var guarded = Route(content: Self.content(500_000, seed: 303))
        guarded.requiredAuthorization = "Bearer fresh"
        http.set("/guarded", guarded)
        let task = try await start(
            http.url("/guarded"), directory.file("guarded.bin"),
            [
                "headers": .stringDict(["Authorization": "Bearer stale"]), "title": .string("Old title"),
            ])
        try await waitState(task, ["failed"])
        let changes = try await watchProperties(task)
        try await update(
            task,
            [
                "headers": .stringDict(["Authorization": "Bearer fresh"]), "title": .string("New title"),
                "priority": .string("low"), "metadata": .vardict(["episode": .uint32(7)]),
            ])
        try await until("the Title's PropertiesChanged") {
            changes.withLockedValue { $0 }.contains { $0["Title"]?.stringValue == "New title" }
        }
        _ = try await call("Resume", [.objectPath(task)])
        try await waitState(task, ["finished"])
        XCTAssertEqual(http.requests(for: "/guarded").last?.userHeaders["authorization"], "Bearer fresh")

        stopDaemon()
        try await startDaemon()
        let title = try await property(task, "Title")
        XCTAssertEqual(title?.stringValue, "New title")
        let priority = try await property(task, "Priority")
        XCTAssertEqual(priority?.stringValue, "low", "kept through a restart")
        let metadata = try await property(task, "Metadata")
        XCTAssertEqual(metadata?.vardictValue?["episode"]?.uint32Value, 7)
    }

    func testWhatMayNotChangeIsRefusedByName() async throws {
        var slow = Route(content: Self.content(2_000_000, seed: 304))
        slow.bytesPerSecond = 500_000
        http.set("/slow", slow)
        let task = try await start(http.url("/slow"), directory.file("slow.bin"))
        for (options, expected) in [
            (["url": DBusValue.string(http.url("/other"))], "unknown option 'url'"),
            (["connections": .uint32(4)], "unknown option 'connections'"),
            (["headers": .stringDict(["Range": "bytes=0-"])], "header 'Range' is set by the service"),
            (["title": .string("two\nlines")], "title must not contain control characters"),
            (["priority": .string("urgent")], "priority"),
        ] {
            do {
                try await update(task, options)
                XCTFail("\(options) was accepted")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
                XCTAssertTrue(error.message.contains(expected), error.message)
            }
        }
        let title = try await property(task, "Title")
        XCTAssertEqual(title?.stringValue, "", "nothing changed")
        let viaBusctl = try await run([
            "busctl", "--address=\(bus.address)", "call", "org.example.Downloads", task.rawValue,
            "org.example.Downloads.Task",
            "Update", "a{sv}", "2", "priority", "s", "high", "max_bytes_per_second", "t", "250000",
        ])
        XCTAssertEqual(viaBusctl.status, 0, viaBusctl.description)
        let limit = try await property(task, "MaxBytesPerSecond")
        XCTAssertEqual(limit?.uint64Value, 250_000)
        _ = try await call("Cancel", [.objectPath(task)])
    }
}
