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
}
