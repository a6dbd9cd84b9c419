import DownloadModel
@testable import DownloadStore
import DownloadEngine
import Foundation
import GRDB
import TestSupport
import XCTest

/// The store on a real SQLite file (GRDB's `DatabaseQueue` on a temporary path).
final class DownloadStoreTests: XCTestCase {
    var directory: TemporaryDirectory!
    var path: String { directory.file("downloads.sqlite") }

    override func setUp() async throws {
        directory = try TemporaryDirectory(prefix: "store-test")
    }

    override func tearDown() async throws {
        directory?.remove()
    }

    func record(
        _ id: UInt64, session: String = "photos", change: (inout DownloadTaskRecord) -> Void = { _ in }
    ) -> DownloadTaskRecord {
        var options = DownloadOptions()
        options.maxBytesPerSecond = 5000
        options.priority = .high
        options.headers = ["X-Token": "t"]
        var record = DownloadTaskRecord(
            id: id, owner: 1000, session: session, url: "http://127.0.0.1/f", destination: "/tmp/f\(id)",
            destinationIsDirectory: false, options: options
        )
        change(&record)
        return record
    }

    func testOptionsAreStoredWithTheDocumentedKeysAndRoundTrip() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        try store.insertTask(record(1))
        let text = try DatabaseQueue(path: path).read { db in
            try String.fetchOne(db, sql: "SELECT options FROM task WHERE id = 1")
        }
        // The headers (which may hold a token) are sealed; the rest reads as documented.
        let stored = try XCTUnwrap(text)
        XCTAssertTrue(stored.hasPrefix(#"{"max_bytes_per_second":5000,"priority":"high","sealed_secrets":""#), stored)
        XCTAssertFalse(stored.contains("X-Token"), stored)
        let loaded = try store.loadTasks()
        XCTAssertEqual(loaded.tasks, [record(1)])
        XCTAssertEqual(loaded.tasks.first?.owner, 1000, "the owner is a column of its own")
        XCTAssertEqual(loaded.tasks.first?.session, "photos", "the plain session name")
    }

    func testMigrationV2RewritesTheOptionsOfV1Rows() throws {
        let queue = try DatabaseQueue(path: path)
        try DownloadStore.migrator.migrate(queue, upTo: "v1")
        try queue.write { db in
            try db.execute(sql: "INSERT INTO session (ownerUID, name, endedSinceCall) VALUES (1000, 'old', 0)")
            try db.execute(
                sql: """
                    INSERT INTO task (id, ownerUID, session, url, destination, destinationIsDirectory, state, durableOffset,
                                      expectedLength, options, createdAt, updatedAt)
                    VALUES (7, 1000, 'old', 'http://127.0.0.1/x', '/tmp/x', 0, 'paused', 10, 100,
                            '{"headers":{},"priority":"low","maxBytesPerSecond":77,"overwrite":true,"stallTimeout":9}',
                            '2026-01-01 00:00:00', '2026-01-01 00:00:00')
                    """)
        }
        let store = try DownloadStore(queue, secrets: .forTests)
        let loaded = try store.loadTasks()
        XCTAssertEqual(loaded.rejected, [])
        let options = try XCTUnwrap(loaded.tasks.first?.options)
        XCTAssertEqual(options.priority, .low)
        XCTAssertEqual(options.maxBytesPerSecond, 77)
        XCTAssertTrue(options.overwrite)
        XCTAssertEqual(options.stallTimeout, 9)
        XCTAssertEqual(loaded.tasks.first?.durableOffset, 10)
    }

    /// `sha256` (hex) in rows of v5 becomes `checksum` `sha256:HEX`; the task fields of v1.2 are
    /// options like the others and round-trip in the same column.
    func testMigrationV6RewritesSha256AsAChecksumAndTaskFieldsRoundTrip() throws {
        let queue = try DatabaseQueue(path: path)
        try DownloadStore.migrator.migrate(queue, upTo: "v5-segments")
        let hex = String(repeating: "ab", count: 32)
        try queue.write { db in
            try db.execute(sql: "INSERT INTO session (ownerUID, name, endedSinceCall) VALUES (1000, 'old', 0)")
            try db.execute(
                sql: """
                    INSERT INTO task (id, ownerUID, session, url, destination, destinationIsDirectory, state, durableOffset,
                                      expectedLength, options, createdAt, updatedAt)
                    VALUES (7, 1000, 'old', 'http://127.0.0.1/x', '/tmp/x', 0, 'paused', 10, 100,
                            '{"priority":"low","sha256":"\(hex)"}', '2026-01-01 00:00:00', '2026-01-01 00:00:00')
                    """)
        }
        let store = try DownloadStore(queue, secrets: .forTests)
        let text = try queue.read { db in try String.fetchOne(db, sql: "SELECT options FROM task WHERE id = 7") }
        XCTAssertEqual(text, #"{"checksum":"sha256:\#(hex)","priority":"low"}"#)
        let loaded = try store.loadTasks()
        XCTAssertEqual(loaded.rejected, [])
        XCTAssertEqual(loaded.tasks.first?.options.checksum, try Checksum(.sha256, hex: hex))
        XCTAssertEqual(loaded.tasks.first?.options.priority, .low)

        var fields = record(8)
        fields.options.title = "Episode 42"
        fields.options.taskDescription = "The one about SQLite"
        fields.options.metadata = ["app-id": .string("podcasts"), "episode": .uint32(42), "explicit": .boolean(false)]
        fields.options.earliestBegin = 1_900_000_000
        fields.options.checksum = try Checksum(.md5, hex: String(repeating: "0", count: 32))
        try store.insertTask(fields)
        let row = try queue.read { db in try String.fetchOne(db, sql: "SELECT options FROM task WHERE id = 8") } ?? ""
        XCTAssertTrue(
            row.contains(#""metadata":{"app-id":{"s":"podcasts"},"episode":{"u":42},"explicit":{"b":false}}"#), row)
        XCTAssertTrue(row.contains(#""earliest_begin":1900000000"#), row)
        XCTAssertTrue(row.contains(#""description":"The one about SQLite""#), row)
        XCTAssertEqual(try store.loadTasks().tasks.first { $0.id == 8 }, fields)
    }

    func testAnUnreadableRowIsKeptAsideAndTheRestIsServed() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        try store.insertTask(record(1))
        try store.insertTask(record(2))
        try store.insertTask(record(3))
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE task SET options = 'not json' WHERE id = 2")
            try db.execute(sql: "UPDATE task SET options = '{\"priority\":\"urgent\"}' WHERE id = 3")
        }
        let loaded = try store.loadTasks()
        XCTAssertEqual(loaded.tasks.map(\.id), [1])
        XCTAssertEqual(loaded.rejected.map(\.id), [2, 3])
        XCTAssertTrue(loaded.rejected[0].reason.contains("options"), loaded.rejected[0].reason)
        XCTAssertEqual(loaded.nextID, 4, "ids of rows kept aside are not given again")
        let count = try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM task") }
        XCTAssertEqual(count, 3, "nothing was deleted")
    }

    /// Rows with the same options (a group's files) load as records that share one copy of them;
    /// rows whose options have sealed secrets (bound to their task) each have their own, opened
    /// for that task; every field reads back as it was written.
    func testRowsWithTheSameOptionsLoadSharingOneCopy() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let plain = { (record: inout DownloadTaskRecord) in
            record.options.headers = [:]
            record.resolvedPath = record.destination
            record.group = 0
        }
        for id in UInt64(1)...3 { try store.insertTask(record(id, change: plain)) }
        try store.insertTask(record(4))
        try store.insertTask(record(5))
        try store.insertTask(
            record(6) {
                $0.app = "org.example.App"; $0.fileMode = 0o640; $0.validator = "\"v\""
            })
        let loaded = try store.loadTasks().tasks
        XCTAssertEqual(loaded.map(\.id), [1, 2, 3, 4, 5, 6])
        XCTAssertTrue(loaded[0].request.$options.sharesStorage(with: loaded[2].request.$options))
        XCTAssertFalse(loaded[3].request.$options.sharesStorage(with: loaded[4].request.$options), "sealed: its own")
        XCTAssertEqual(loaded[4].options.headers, ["X-Token": "t"])
        XCTAssertEqual(loaded[0].options.maxBytesPerSecond, 5000)
        XCTAssertEqual(loaded[0], record(1, change: plain))
        XCTAssertEqual(
            loaded[5],
            record(6) {
                $0.app = "org.example.App"; $0.fileMode = 0o640; $0.validator = "\"v\""
            })
    }

    func testSegmentsAreSavedWithTheTaskAndCheckedWhenLoaded() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let ranges = [ByteRange(start: 100, end: 250), ByteRange(start: 500, end: 1000)]
        let segmented = record(1) { record in
            record.expectedLength = 1000
            record.validator = "\"v\""
            record.segments = ranges
            record.durableOffset = ByteRange.held(length: 1000, remaining: ranges)
        }
        try store.insertTask(segmented)
        try store.insertTask(record(2))
        XCTAssertEqual(try store.loadTasks().tasks, [segmented, record(2)])
        var later = segmented
        later.segments = [ByteRange(start: 900, end: 1000)]
        later.durableOffset = 900
        try store.save(later)
        XCTAssertEqual(try store.loadTasks().tasks.first, later, "a checkpoint replaces the ranges")
        later.segments = nil
        later.durableOffset = 1000
        try store.save(later)
        XCTAssertNil(try store.loadTasks().tasks.first?.segments, "one stream again: no rows")
        // Ranges that do not fit the file are a row kept aside, not a download that splices.
        try store.save(segmented)
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "INSERT INTO segment (taskID, start, \"end\") VALUES (1, 200, 300)")
        }
        let loaded = try store.loadTasks()
        XCTAssertEqual(loaded.rejected.map(\.id), [1])
        XCTAssertTrue(loaded.rejected[0].reason.contains("segments"), loaded.rejected[0].reason)
        try store.deleteTask(1)
        let left = try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM segment")
        }
        XCTAssertEqual(left, 0, "a task's ranges go with it")
    }

    func testDatesAreWrittenAsGRDBWritesThemAndReadBack() throws {
        var dates = [
            0, 0.0004, 0.0005, 0.9996, 59.9999, -1.5, -0.0004, 951_782_400, 1_700_000_000.1239, 253_402_300_799.999,
        ]
        .map { Date(timeIntervalSince1970: $0) }
        // The same 5,000 dates every run (SplitMix64 from a fixed seed), before and after 1970.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<5000 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            dates.append(Date(timeIntervalSince1970: -2e9 + Double(z >> 11) / Double(1 << 53) * 6e9))
        }
        dates.append(Date())
        for date in dates {
            let ours = StoredTime.text(date)
            XCTAssertEqual(ours, date.databaseValue, "\(date.timeIntervalSince1970)")
            let read = try XCTUnwrap(Date.fromDatabaseValue(ours))
            XCTAssertEqual(read.timeIntervalSince1970, date.timeIntervalSince1970, accuracy: 0.0006)
        }
    }

    func testIdsAreNeverGivenTwiceEvenAfterRemoval() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        try store.insertTask(record(41))
        try store.deleteTask(41)
        XCTAssertEqual(try store.loadTasks().nextID, 42)
    }

    func testAnEndedTaskMakesOneCompletionCallPending() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let session = SessionID(owner: 1000, name: "photos")
        try store.insertTask(record(1))
        XCTAssertEqual(try store.sessionBecameIdle(session).transition, false, "nothing ended yet")
        try store.save(record(1) { $0.state = .finished })
        try store.save(record(1) { $0.state = .finished })
        let first = try store.sessionBecameIdle(session)
        XCTAssertEqual(first.transition, true)
        XCTAssertEqual(first.pending, true)
        XCTAssertEqual(try store.sessionBecameIdle(session).transition, false, "one call per transition")
        try store.completionDelivered(session)
        XCTAssertFalse(try store.isPending(session))
        XCTAssertFalse(
            try store.isPending(SessionID(owner: 1001, name: "photos")), "another user's session is another session")
    }

    /// The last end of a session and the completion call it makes due are one transaction; the
    /// call is announced (`EventsFinished`) once, by the idle step after it.
    func testTheLastEndMakesItsCompletionCallDueInItsOwnTransaction() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let session = SessionID(owner: 1000, name: "photos")
        try store.insertTask(record(1))
        try store.insertTask(record(2) { $0.state = .running })
        // The engine says idle, but the rows still hold task 2 running (its save is on its way):
        // the end is counted, no call yet.
        try store.save(record(1) { $0.state = .finished }, sessionIdle: true)
        XCTAssertFalse(try store.isPending(session))
        XCTAssertEqual(try store.sessionsWithUnreportedEnds(), [session])
        // Task 2's end, the last: the count of both becomes the call, in the end's transaction.
        try store.save(record(2) { $0.state = .failed }, sessionIdle: true)
        XCTAssertTrue(try store.isPending(session))
        XCTAssertEqual(try store.sessionsWithUnreportedEnds(), [], "nothing left to count")
        XCTAssertEqual(
            try store.unannouncedCompletions(), [session], "what a kill here leaves: announced at the next start")
        let idle = try store.sessionBecameIdle(session)
        XCTAssertEqual([idle.transition, idle.pending], [true, true], "announced once")
        XCTAssertEqual(try store.unannouncedCompletions(), [])
        XCTAssertEqual(try store.sessionBecameIdle(session).transition, false)
        // A pause that leaves the session idle with an end counted makes the call due too, and a
        // call still pending is announced again for the new end (still one call).
        try store.insertTask(record(3))
        try store.save(record(3) { $0.state = .finished })
        try store.insertTask(record(4) { $0.state = .running })
        try store.save(record(4) { $0.state = .paused }, sessionIdle: true)
        XCTAssertEqual(try store.unannouncedCompletions(), [session])
        XCTAssertEqual(try store.sessionBecameIdle(session).transition, true)
        try store.completionDelivered(session)
        XCTAssertFalse(try store.isPending(session))
    }

    func testMigrationV7KeepsAPendingCallAsAnnounced() throws {
        let queue = try DatabaseQueue(path: path)
        try DownloadStore.migrator.migrate(queue, upTo: "v6-checksum-option")
        try queue.write { db in
            try db.execute(sql: "INSERT INTO session (ownerUID, name, endedSinceCall) VALUES (1000, 'old', 0)")
            try db.execute(
                sql:
                    "INSERT INTO pendingCompletion (ownerUID, session, createdAt) VALUES (1000, 'old', '2026-01-01 00:00:00')"
            )
        }
        let store = try DownloadStore(queue, secrets: .forTests)
        let session = SessionID(owner: 1000, name: "old")
        XCTAssertTrue(try store.isPending(session))
        XCTAssertEqual(try store.unannouncedCompletions(), [], "a call pending before the migration was announced then")
        XCTAssertEqual(try store.sessionBecameIdle(session).transition, false)
    }

    /// v8: a sandboxed app's task keeps its app and its in-place file through a restart; rows
    /// from before are host callers' tasks.
    func testMigrationV8KeepsTheAppAndEarlierRowsAreTheHosts() throws {
        let queue = try DatabaseQueue(path: path)
        try DownloadStore.migrator.migrate(queue, upTo: "v7-completion-announced")
        try queue.write { db in
            try db.execute(sql: "INSERT INTO session (ownerUID, name, endedSinceCall) VALUES (1000, 'old', 0)")
            try db.execute(
                sql: """
                    INSERT INTO task (id, ownerUID, session, url, destination, destinationIsDirectory, state, durableOffset,
                    expectedLength, options, createdAt, updatedAt) VALUES (1, 1000, 'old', 'http://127.0.0.1/f', '/tmp/f1', 0,
                    'paused', 0, -1, '{}', '2026-01-01 00:00:00', '2026-01-01 00:00:00')
                    """)
        }
        let store = try DownloadStore(queue, secrets: .forTests)
        let app = record(2, session: "org.example.Player\u{1F}default") { record in
            record.app = "org.example.Player"
            record.writesInPlace = true
        }
        try store.insertTask(app)
        let loaded = try store.loadTasks().tasks
        XCTAssertEqual(loaded.first { $0.id == 1 }?.app, "", "a row from before apps were told apart is the host's")
        XCTAssertEqual(loaded.first { $0.id == 2 }, app)
        XCTAssertEqual(loaded.first { $0.id == 2 }?.app, "org.example.Player")
        XCTAssertEqual(loaded.first { $0.id == 2 }?.writesInPlace, true)
    }

    func testTheStoreObserverWritesWhatTheEngineReports() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let observer = StoreObserver(store: store, logger: .init(label: "test"))
        var task = record(5)
        observer.taskWasCreated(TaskSnapshot(record: task, bytesWritten: 0))
        task.durableOffset = 4096
        task.validator = "\"v\""
        observer.taskDidCheckpoint(TaskSnapshot(record: task, bytesWritten: 5000))
        task.options.maxBytesPerSecond = 1
        observer.taskDidChangeOptions(TaskSnapshot(record: task, bytesWritten: 5000))
        task.state = .failed
        task.errorName = "HTTPError"
        observer.task(TaskSnapshot(record: task, bytesWritten: 5000), didChangeState: .failed)
        XCTAssertEqual(try store.loadTasks().tasks, [], "nothing is written before the batch ends")
        observer.eventsWereDelivered()
        XCTAssertEqual(try store.loadTasks().tasks, [task])
        XCTAssertEqual(store.saveCounts.transactions, 1, "the batch's four writes in one transaction")
        observer.taskWasRemoved(TaskSnapshot(record: task, bytesWritten: 5000))
        observer.eventsWereDelivered()
        XCTAssertEqual(try store.loadTasks().tasks, [])
    }

    /// A write of a batch that fails is that task's failure alone: the others are committed.
    func testAFailedWriteOfABatchIsOnlyItsTasksFailure() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let observer = StoreObserver(store: store, logger: .init(label: "test"))
        observer.taskWasCreated(TaskSnapshot(record: record(5), bytesWritten: 0))
        observer.taskWasCreated(TaskSnapshot(record: record(6), bytesWritten: 0))
        // The same id again: the insert breaks the primary key.
        observer.taskWasCreated(TaskSnapshot(record: record(5), bytesWritten: 0))
        observer.eventsWereDelivered()
        XCTAssertEqual(try store.loadTasks().tasks.map(\.id), [5, 6])
        XCTAssertNotNil(observer.takeFailure(5))
        XCTAssertNil(observer.takeFailure(6))
        XCTAssertNil(observer.takeFailure(5), "taken once")
    }

    /// Every save writes a task's whole row, so of a task's plain saves in one batch only the
    /// last is written; its end (counted for the session's completion call) never gives way.
    func testOneBatchWritesATasksRowOnceUnlessItEnds() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let observer = StoreObserver(store: store, logger: .init(label: "test"))
        var task = record(5)
        observer.taskWasCreated(TaskSnapshot(record: task, bytesWritten: 0))
        task.state = .running
        observer.task(TaskSnapshot(record: task, bytesWritten: 0), didChangeState: .running)
        task.options.maxBytesPerSecond = 1
        observer.taskDidChangeOptions(TaskSnapshot(record: task, bytesWritten: 0))
        task.expectedLength = 65536
        task.validator = "\"v\""
        observer.task(TaskSnapshot(record: task, bytesWritten: 0), didReceiveResponse: 200, expectedLength: 65536)
        task.durableOffset = 4096
        observer.taskDidCheckpoint(TaskSnapshot(record: task, bytesWritten: 4096))
        let other = record(6)
        observer.taskWasCreated(TaskSnapshot(record: other, bytesWritten: 0))
        observer.eventsWereDelivered()
        XCTAssertEqual(store.saveCounts.writes, 3, "two inserts and one save of task 5 for its four")
        XCTAssertEqual(
            try store.loadTasks().tasks, [task, other], "the last save has it all, the options of an earlier one too")

        // An end and what follows it in the same batch are both written: the end is counted.
        task.state = .failed
        task.errorName = "HTTPError"
        observer.task(TaskSnapshot(record: task, bytesWritten: 4096), didChangeState: .failed)
        task.state = .queued
        task.errorName = nil
        observer.task(TaskSnapshot(record: task, bytesWritten: 4096), didChangeState: .queued)
        observer.eventsWereDelivered()
        XCTAssertEqual(store.saveCounts.writes, 5)
        XCTAssertEqual(try store.sessionsWithUnreportedEnds(), [SessionID(owner: 1000, name: "photos")])
        XCTAssertEqual(try store.loadTasks().tasks.first, task)

        // A delete in between keeps the save before it (and the save after it changes nothing).
        task.state = .paused
        observer.task(TaskSnapshot(record: task, bytesWritten: 4096), didChangeState: .paused)
        observer.taskWasRemoved(TaskSnapshot(record: task, bytesWritten: 4096))
        observer.taskDidChangeURL(TaskSnapshot(record: task, bytesWritten: 4096))
        observer.eventsWereDelivered()
        XCTAssertEqual(store.saveCounts.writes, 8)
        XCTAssertEqual(try store.loadTasks().tasks, [other])
    }
}
