import DBus
import Foundation
import TestSupport
import XCTest

extension CompletionHandlerTests {
    /// While the daemon's database cannot take a write (here another connection holds its write
    /// lock; a state directory on a disk whose syncs take seconds looks the same from the daemon),
    /// `RegisterCompletionHandler`s wait for it and no other call does. The registrations' writes
    /// ran on the cooperative pool, which every call and transfer of the daemon shares (as wide
    /// as the cores, a thread more about every second while its threads block): a few apps
    /// registering at that moment held back a `ListTasks` that needs no write at all.
    func testRegistrationsWaitingForTheDatabaseHoldUpNoOtherCall() async throws {
        // Hold the database's write lock until told to let go.
        let held = directory.file("lock-held")
        let release = directory.file("lock-release")
        let holder = try ChildProcess(
            [
                "/usr/bin/python3", "-c",
                """
                import os, sqlite3, time
                db = sqlite3.connect('\(stateDirectory)/downloads.sqlite', isolation_level=None, timeout=30)
                db.execute('BEGIN IMMEDIATE')
                open('\(held)', 'w').close()
                while not os.path.exists('\(release)'):
                    time.sleep(0.01)
                db.execute('COMMIT')
                """,
            ], environment: [:])
        addTeardownBlock { holder.stop() }
        try await until("the database's write lock held elsewhere") { FileManager.default.fileExists(atPath: held) }

        // An app registers for several sessions at once, each answer recorded as it comes.
        let count = max(6, 3 * ProcessInfo.processInfo.activeProcessorCount)
        let calls = try CallsInFlight(answersFile: directory.file("register-answers"))
        let app = try ChildProcess(
            [
                "/usr/bin/python3", "-c",
                calls.script(
                    busAddress: bus.address, count: count,
                    sends: """
                        for i in range(\(count)):
                            m.RegisterCompletionHandler('s%d' % i, dbus.ObjectPath('/app'), dbus.Dictionary({}, signature='sv'), timeout=120,
                                                        reply_handler=ok, error_handler=err)
                        """),
            ], environment: bus.environment)
        addTeardownBlock { app.stop() }
        let answers = calls.answers
        try await until("the registrations sent") { answers().contains("sent") }

        // A call that writes nothing is answered while every registration still waits.
        let tasks = try await call("ListTasks", [.string("")])
        XCTAssertEqual(tasks.first?.objectPathArrayValue, [])
        XCTAssertEqual(answers(), ["sent"], "the registrations are still waiting for the database")

        // The lock goes: every registration is made, none lost.
        XCTAssertTrue(FileManager.default.createFile(atPath: release, contents: nil))
        try await until("every registration answered", seconds: 60) { answers().count == count + 1 }
        XCTAssertEqual(answers().filter { $0 == "ok" }.count, count, "\(answers())")
        XCTAssertEqual(holder.wait(), 0, "the lock's holder committed")
        let rows = try await run([
            "/usr/bin/python3", "-c",
            """
            import sqlite3
            print(sqlite3.connect('\(stateDirectory)/downloads.sqlite').execute('SELECT count(*) FROM handler').fetchone()[0])
            """,
        ])
        XCTAssertEqual(rows.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "\(count)", "\(rows)")
    }
}
