import Crypto
import DownloadModel
@testable import DownloadStore
import Foundation
import GRDB
import ProxyRules
import TestSupport
import XCTest

/// A task's headers and proxy in the store: sealed under a key the database file does not hold.
final class StoreSecretsTests: XCTestCase {
    var directory: TemporaryDirectory!
    var path: String { directory.path + "/downloads.sqlite" }
    let token = "Bearer s3cr3t-T0ken-4242"
    let proxyPassword = "pr0xy-Pa55"

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        directory.remove()
    }

    private func record(_ id: UInt64) throws -> DownloadTaskRecord {
        var options = DownloadOptions()
        options.headers = ["Authorization": token]
        options.proxy = try ProxySetting.parse("http://alice:\(proxyPassword)@127.0.0.1:3128")
        return DownloadTaskRecord(
            id: id, owner: 1000, session: "s", url: "http://127.0.0.1/f", destination: "/tmp/f\(id)",
            destinationIsDirectory: false, options: options
        )
    }

    /// Every byte of the database and its WAL: where a secret could be left.
    private func fileBytes() -> Data {
        ["", "-wal", "-shm"].reduce(into: Data()) { all, suffix in
            all.append(FileManager.default.contents(atPath: path + suffix) ?? Data())
        }
    }

    private func assertNoSecretIn(_ bytes: Data, file: StaticString = #filePath, line: UInt = #line) {
        for secret in [token, proxyPassword, "Authorization"] {
            XCTAssertNil(
                bytes.range(of: Data(secret.utf8)), "\(secret) is in clear in the database", file: file, line: line)
        }
    }

    func testHeadersAndProxyAreSealedOnDiskAndReadBackWithTheKey() throws {
        let store = try DownloadStore(DatabasePool(path: path), secrets: .forTests)
        try store.insertTask(record(1))
        try store.checkpoint()
        assertNoSecretIn(fileBytes())
        XCTAssertEqual(try store.loadTasks().tasks, [try record(1)])
        // Another key (a copy of the database without its key file) opens nothing.
        let other = try DownloadStore(
            DatabasePool(path: path), secrets: StoreSecrets(rootKey: SymmetricKey(size: .bits256)))
        let loaded = try other.loadTasks()
        XCTAssertTrue(loaded.tasks.isEmpty)
        XCTAssertTrue(
            loaded.rejected.contains { $0.reason.contains("do not open") }, "\(loaded.rejected)")
    }

    func testASealedValueMovedToAnotherRowDoesNotOpen() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        try store.insertTask(record(1))
        var plain = try record(2)
        plain.options = DownloadOptions()
        try store.insertTask(plain)
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "UPDATE task SET options = (SELECT options FROM task WHERE id = 1) WHERE id = 2")
        }
        let loaded = try DownloadStore(queue, secrets: .forTests).loadTasks()
        XCTAssertEqual(loaded.tasks.map(\.id), [1])
        XCTAssertTrue(loaded.rejected.contains { $0.reason.contains("do not open") }, "\(loaded.rejected)")
    }

    func testRowsWrittenInClearBeforeAreSealedWhenTheStoreOpens() throws {
        let queue = try DatabaseQueue(path: path)
        try DownloadStore.migrator.migrate(queue)
        try queue.write { db in
            try db.execute(sql: "INSERT INTO session (ownerUID, name, endedSinceCall) VALUES (1000, 's', 0)")
            try db.execute(
                sql: """
                    INSERT INTO task (id, ownerUID, session, url, destination, destinationIsDirectory, state, durableOffset,
                                      expectedLength, options, createdAt, updatedAt)
                    VALUES (3, 1000, 's', 'http://127.0.0.1/x', '/tmp/x', 0, 'paused', 10, 100, ?,
                            '2026-01-01 00:00:00', '2026-01-01 00:00:00')
                    """,
                arguments: [
                    #"{"headers":{"Authorization":"\#(token)"},"priority":"low","proxy":"http://alice:\#(proxyPassword)@127.0.0.1:3128"}"#
                ])
        }
        try queue.close()
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        assertNoSecretIn(fileBytes())
        let task = try XCTUnwrap(store.loadTasks().tasks.first)
        XCTAssertEqual(task.options.headers, ["Authorization": token])
        XCTAssertEqual(task.options.proxy?.text, "http://alice:\(proxyPassword)@127.0.0.1:3128")
        XCTAssertEqual(task.options.priority, .low)
    }
}
