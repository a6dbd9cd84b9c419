@testable import DownloadModel
@testable import DownloadStore
import Foundation
import GRDB
import TestSupport
import XCTest

/// Group commit on a real SQLite file in WAL mode (a `DatabasePool`, as the daemon opens it).
final class CommitGroupTests: XCTestCase {
    var directory: TemporaryDirectory!
    var pool: DatabasePool!

    override func setUp() async throws {
        directory = try TemporaryDirectory(prefix: "commit-group-test")
        pool = try DatabasePool(path: directory.file("group.sqlite"))
        try await pool.write { db in try db.execute(sql: "CREATE TABLE item (n INTEGER PRIMARY KEY)") }
    }

    override func tearDown() async throws {
        try? pool?.close()
        directory?.remove()
    }

    func rows() throws -> [Int] {
        try pool.read { db in try Int.fetchAll(db, sql: "SELECT n FROM item ORDER BY n") }
    }

    func group() -> CommitGroup {
        let pool = self.pool!
        return CommitGroup(database: pool) { write in try pool.write(write.body) }
    }

    static func inserting(_ n: Int) -> StoreWrite {
        StoreWrite(mayUseReserve: true) { db in try db.execute(sql: "INSERT INTO item (n) VALUES (?)", arguments: [n]) }
    }

    /// A batch is one transaction: every row is there when `commit` returns, each write succeeded.
    func testABatchIsCommittedInOneTransaction() throws {
        let group = group()
        let results = group.commit((0..<32).map(Self.inserting))
        XCTAssertEqual(try rows(), Array(0..<32))
        XCTAssertEqual(results.count, 32)
        XCTAssertTrue(results.allSatisfy { (try? $0.get()) != nil })
        XCTAssertEqual(group.commits, 1)
        XCTAssertEqual(group.writes, 32)
    }

    /// A write that fails in a batch fails alone: the batch is made again write by write, and
    /// only the failing write's result is an error.
    func testAFailingWriteFailsOnlyItself() throws {
        let group = group()
        // 5 inserts a row that is there already: a constraint error.
        let results = group.commit((0..<10).map { Self.inserting($0 == 5 ? 0 : $0) })
        let failed = results.indices.filter { if case .failure = results[$0] { return true } else { return false } }
        XCTAssertEqual(failed, [5])
        if case .failure(let error) = results[5] {
            XCTAssertEqual((error as? DatabaseError)?.resultCode, .SQLITE_CONSTRAINT)
        }
        XCTAssertEqual(try rows(), [0, 1, 2, 3, 4, 6, 7, 8, 9])
        XCTAssertEqual(group.commits, 10, "the failed group, then each write alone")
    }

    /// Writes of one row in order: a later write of a batch sees the earlier ones.
    func testWritesOfABatchRunInOrder() throws {
        let group = group()
        let results = group.commit([
            Self.inserting(1),
            StoreWrite(mayUseReserve: true) { db in try db.execute(sql: "UPDATE item SET n = 2 WHERE n = 1") },
            StoreWrite(mayUseReserve: true) { db in try db.execute(sql: "UPDATE item SET n = 3 WHERE n = 2") },
        ])
        XCTAssertTrue(results.allSatisfy { (try? $0.get()) != nil })
        XCTAssertEqual(try rows(), [3])
        XCTAssertEqual(group.commit([]).count, 0)
        XCTAssertEqual(group.commits, 1, "an empty batch commits nothing")
    }
}
