@testable import DownloadModel
@testable import DownloadEngine
import XCTest

/// The manager's bookkeeping on its own: ids, per-owner and per-session counts, removal.
final class TaskTableTests: XCTestCase {
    private func record(
        _ id: UInt64, owner: UInt32, session: String, state: DownloadState = .queued
    ) -> DownloadTaskRecord {
        DownloadTaskRecord(
            id: id, owner: owner, session: session, url: "http://127.0.0.1/\(id)", destination: "/tmp/\(id)",
            destinationIsDirectory: false, options: DownloadOptions(), state: state
        )
    }

    func testIdsAreNeverGivenTwiceEvenAfterRestoredTasks() {
        var table = TaskTable(scheduler: Scheduler(maxRunning: 4, maxRunningPerSession: 2))
        XCTAssertEqual(table.takeID(), 1)
        let restored = record(7, owner: 1, session: "a", state: .paused)
        table.add(DownloadTask(record: restored), restored)
        XCTAssertEqual(table.takeID(), 8, "after the highest id added")
        XCTAssertEqual(table.takeID(), 9)
    }

    func testCountsFollowAddsAndRemoves() {
        var table = TaskTable(scheduler: Scheduler(maxRunning: 4, maxRunningPerSession: 2))
        let a1 = record(1, owner: 1000, session: "a"), a2 = record(2, owner: 1000, session: "a")
        let b = record(3, owner: 1000, session: "b", state: .finished), other = record(4, owner: 1001, session: "a")
        for r in [a1, a2, b, other] { table.add(DownloadTask(record: r), r) }
        XCTAssertEqual(table.owners[1000], TaskTable.OwnerTasks(count: 3, sessions: ["a": 2, "b": 1]))
        XCTAssertEqual(table.owners[1001]?.count, 1)
        XCTAssertTrue(table.hasActiveTasks(in: a1.sessionID))
        XCTAssertFalse(table.hasActiveTasks(in: b.sessionID), "a finished task is not active")
        XCTAssertTrue(table.hasActiveTasks(in: other.sessionID), "the same name of another owner is another session")

        XCTAssertTrue(table.remove(a1))
        XCTAssertFalse(table.remove(a1), "only once")
        XCTAssertTrue(table.hasActiveTasks(in: a1.sessionID), "a2 is still queued")
        table.activeChanged(a2.sessionID, by: -1)
        XCTAssertFalse(table.hasActiveTasks(in: a2.sessionID))
        XCTAssertNil(table.activePerSession[a2.sessionID], "no zero entries kept")
        var ended = a2
        ended.state = .finished
        XCTAssertTrue(table.remove(ended))
        XCTAssertTrue(table.remove(b))
        XCTAssertNil(table.owners[1000], "an owner with no tasks is forgotten")
        XCTAssertEqual(table.tasks.keys.sorted(), [4])
    }

    /// A session running dry is reported once, however many ends find it idle, and again once
    /// a task of it was active since.
    func testASessionBecomingIdleIsTakenOncePerTimeItRunsDry() {
        var table = TaskTable(scheduler: Scheduler(maxRunning: 4, maxRunningPerSession: 2))
        let a1 = record(1, owner: 1000, session: "a"), a2 = record(2, owner: 1000, session: "a")
        for r in [a1, a2] { table.add(DownloadTask(record: r), r) }
        XCTAssertFalse(table.takeIdle(a1.sessionID), "two tasks active")
        table.activeChanged(a1.sessionID, by: -1)
        XCTAssertFalse(table.takeIdle(a1.sessionID), "one still active")
        table.activeChanged(a1.sessionID, by: -1)
        XCTAssertTrue(table.takeIdle(a1.sessionID), "the first end to find it idle")
        XCTAssertFalse(table.takeIdle(a1.sessionID), "the second does not report it again")
        table.activeChanged(a1.sessionID, by: 1)
        table.activeChanged(a1.sessionID, by: -1)
        XCTAssertTrue(table.takeIdle(a1.sessionID), "idle again after a task of it was active")
        XCTAssertFalse(table.takeIdle(a1.sessionID))
        // A session whose tasks are all gone forgets the mark.
        for r in [a1, a2] {
            var ended = r
            ended.state = .finished
            XCTAssertTrue(table.remove(ended))
        }
        XCTAssertFalse(table.reportedIdle.contains(a1.sessionID))
    }

    /// Pages of tasks in id order (`ListTasksPage`): ids added out of order (a restore) find
    /// their place, removed ones are skipped and compacted away, the last page says so.
    func testTasksAfterAnIdComeInIdOrderThroughRemovalsAndCompaction() {
        var table = TaskTable(scheduler: Scheduler(maxRunning: 4, maxRunningPerSession: 2))
        for id in [5, 1, 3] as [UInt64] {
            let r = record(id, owner: 1, session: "a")
            table.add(DownloadTask(record: r), r)
        }
        for id in UInt64(6)...1000 {
            let r = record(id, owner: 1, session: "a")
            table.add(DownloadTask(record: r), r)
        }
        XCTAssertEqual(table.tasks(after: 0, limit: 4).map(\.id), [1, 3, 5, 6])
        XCTAssertEqual(table.tasks(after: 3, limit: 2).map(\.id), [5, 6])
        XCTAssertEqual(table.tasks(after: 999, limit: 10).map(\.id), [1000])
        XCTAssertEqual(table.tasks(after: .max, limit: 10).map(\.id), [])
        // Most of them removed: the rest still in order, through the compaction.
        for id in UInt64(6)...990 where id % 100 != 0 {
            XCTAssertTrue(table.remove(record(id, owner: 1, session: "a")))
        }
        XCTAssertEqual(
            table.tasks(after: 0, limit: 100).map(\.id),
            [1, 3, 5, 100, 200, 300, 400, 500, 600, 700, 800, 900] + Array(991...1000))
        // A removed id added again (a task restored after its row came back) is in its place once.
        let again = record(7, owner: 1, session: "a")
        table.add(DownloadTask(record: again), again)
        XCTAssertEqual(table.tasks(after: 5, limit: 3).map(\.id), [7, 100, 200])
    }
}
