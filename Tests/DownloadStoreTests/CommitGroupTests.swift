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

    /// Writes 0...`last` through `group`, each inserting `row(n)`: write 0 holds its transaction
    /// open until the others all wait for it. Returns each write's error (nil: committed) and
    /// whether its row was there when its caller returned.
    func writeWhileOneHolds(
        _ group: CommitGroup, last: Int, row: @escaping @Sendable (Int) -> Int = { $0 }
    ) throws -> [Int: (error: (any Error)?, visible: Bool)] {
        let pool = self.pool!
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        let results = Locked([Int: (error: (any Error)?, visible: Bool)]())
        func save(_ n: Int) {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var failure: (any Error)?
                do {
                    try group.write(mayUseReserve: true) { db in
                        if n == 0 {
                            holding.signal()
                            release.wait()
                        }
                        try db.execute(sql: "INSERT INTO item (n) VALUES (?)", arguments: [row(n)])
                    }
                } catch {
                    failure = error
                }
                let there = (try? pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM item WHERE n = ?)", arguments: [n]) }) ?? nil
                results.update { $0[n] = (failure, there ?? false) }
            }
        }
        save(0)
        holding.wait()
        for n in 1...last { save(n) }
        let deadline = Date() + 30
        while group.waitingCount < last, Date() < deadline { usleep(1000) }
        XCTAssertEqual(group.waitingCount, last)
        release.signal()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        return results.value
    }

    /// Writes that arrive while a transaction is being committed are committed together in the
    /// next one, and each caller returns only once its own row is there.
    func testWritesThatWaitedAreCommittedInOneTransaction() throws {
        let pool = self.pool!
        let group = CommitGroup(database: pool) { _, body in try pool.write(body) }
        let results = try writeWhileOneHolds(group, last: 31)
        XCTAssertEqual(try rows(), Array(0...31))
        XCTAssertEqual(group.commits, 2, "the first write alone, then the 31 that waited for it in one transaction")
        XCTAssertEqual(results.count, 32)
        XCTAssertTrue(results.values.allSatisfy { $0.error == nil && $0.visible }, "every caller returned after its row was committed")
    }

    /// A write that fails in a group fails alone: the group is made again write by write, and
    /// only the failing caller sees an error.
    func testAFailingWriteFailsOnlyItsOwnCaller() throws {
        let pool = self.pool!
        let group = CommitGroup(database: pool) { _, body in try pool.write(body) }
        // 5 inserts a row that is there already: a constraint error.
        let results = try writeWhileOneHolds(group, last: 9) { $0 == 5 ? 0 : $0 }
        let failed = results.filter { $0.value.error != nil }
        XCTAssertEqual(Array(failed.keys), [5])
        XCTAssertEqual((failed[5]?.error as? DatabaseError)?.resultCode, .SQLITE_CONSTRAINT)
        XCTAssertEqual(try rows(), [0, 1, 2, 3, 4, 6, 7, 8, 9])
    }

    /// Many writers at once, no holding: every row is committed, in fewer transactions than writes.
    func testManyConcurrentWritersAllLand() throws {
        let pool = self.pool!
        let group = CommitGroup(database: pool) { _, body in try pool.write(body) }
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 500) { n in
            do {
                try group.write(mayUseReserve: true) { db in
                    try db.execute(sql: "INSERT INTO item (n) VALUES (?)", arguments: [n])
                }
            } catch {
                failures.update { $0 += 1 }
            }
        }
        XCTAssertEqual(failures.value, 0)
        XCTAssertEqual(try rows(), Array(0..<500))
        XCTAssertLessThanOrEqual(group.commits, 500)
    }
}

/// A value shared by the test's threads.
private final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}

extension CommitGroupTests {
    /// Bursts of writes that start together, nothing after them: every write of every burst
    /// returns (a wake-up lost in the hand-over between leaders would leave one waiting until
    /// the next write, and after the last burst there is none).
    func testEveryWriteOfABurstReturnsWithNothingAfterIt() throws {
        let pool = self.pool!
        let group = CommitGroup(database: pool) { _, body in try pool.write(body) }
        let writers = 8
        for burst in 0..<300 {
            let done = DispatchGroup()
            let start = DispatchSemaphore(value: 0)
            for writer in 0..<writers {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    start.wait()
                    try? group.write(mayUseReserve: true) { db in
                        try db.execute(sql: "INSERT INTO item (n) VALUES (?)", arguments: [burst * writers + writer])
                    }
                }
            }
            for _ in 0..<writers { start.signal() }
            guard done.wait(timeout: .now() + 10) == .success else {
                return XCTFail("burst \(burst): a write never returned (\(group.waitingCount) waiting)")
            }
        }
        XCTAssertEqual(try rows().count, 300 * writers)
    }
}
