import DBus
import DownloadsAPI
import Foundation
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// Who receives a completion call: only a connection of the handler's owner, and never a unique
/// name recorded on an earlier instance of the bus (unique names are given again after a restart).
final class CompletionDeliveryTests: InProcessServiceTestCase {
    func waitFor(seconds: Double = 10, _ condition: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline && !condition() { try await Task.sleep(for: .milliseconds(20)) }
    }

    func testAHandlerOfAnEarlierBusInstanceIsNotCalledAtItsUniqueName() async throws {
        let app = try CompletionHandlerTests.App(connection: try await Connection.open(.address(bus.address)))
        defer { app.connection.close() }
        try await app.register("s") { try await self.call($0, $1) }
        await stopService()
        try await DatabaseQueue(path: databasePath).write { db in
            try db.execute(sql: "UPDATE handler SET busID = 'an-earlier-bus-instance'")
        }
        try await startService()
        http.set("/f", Route(content: TestData.content(3000)))
        var options = TaskOptions()
        options.session = "s"
        let task = try await start(http.url("/f"), directory.file("f"), options)
        try await waitState(task, [.finished])
        try await waitSignal { $0 == .eventsFinished(session: "s") }
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(app.calls.withLockedValue { $0 }, [], "not sent to a unique name of another bus instance")
        let pending = try await DatabaseQueue(path: databasePath).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM pendingCompletion WHERE session = 's'")
        }
        XCTAssertEqual(pending, 1, "the call stays pending")
        // Registering again on this bus delivers it.
        try await app.register("s") { try await self.call($0, $1) }
        try await waitFor { !app.calls.withLockedValue { $0 }.isEmpty }
        XCTAssertEqual(app.calls.withLockedValue { $0 }, ["s"])
    }

    /// A kill after a task's end was saved (the session counting it) and before the session's
    /// completion call was made pending: the next start makes the call due and delivers it.
    func testAKillBetweenATasksEndAndItsCompletionLosesNoCall() async throws {
        let app = try CompletionHandlerTests.App(connection: try await Connection.open(.address(bus.address)))
        defer { app.connection.close() }
        try await app.register("w") { try await self.call($0, $1) }
        http.set("/w", Route(content: TestData.content(3000)))
        var options = TaskOptions()
        options.session = "w"
        let task = try await start(http.url("/w"), directory.file("w"), options)
        try await waitState(task, [.finished])
        try await waitFor { app.calls.withLockedValue { $0 } == ["w"] }
        await stopService()
        // What the store holds at that moment: the end counted, no call pending yet.
        try await DatabaseQueue(path: databasePath).write { db in
            try db.execute(sql: "UPDATE session SET endedSinceCall = 1 WHERE name = 'w'")
            try db.execute(sql: "DELETE FROM pendingCompletion")
        }
        try await startService()
        try await waitFor { app.calls.withLockedValue { $0 } == ["w", "w"] }
        XCTAssertEqual(
            app.calls.withLockedValue { $0 }, ["w", "w"], "the call a kill interrupted is made after the restart")
        try await waitSignal { $0 == .eventsFinished(session: "w") }
        let left = try await DatabaseQueue(path: databasePath).read { db in
            try Int.fetchOne(db, sql: "SELECT endedSinceCall FROM session WHERE name = 'w'")
        }
        XCTAssertEqual(left, 0)
    }
}
