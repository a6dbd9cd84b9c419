import DownloadModel
@testable import DownloadStore
import Foundation
import GRDB
import TestSupport
import XCTest

/// Groups on a real SQLite file: the group row, its tasks' group id, the recorded decision to
/// publish, and the row gone with the group.
final class GroupStoreTests: XCTestCase {
    var directory: TemporaryDirectory!
    var path: String { directory.file("downloads.sqlite") }

    override func setUp() async throws {
        directory = try TemporaryDirectory(prefix: "group-store-test")
    }

    override func tearDown() async throws {
        directory?.remove()
    }

    func testAGroupAndItsTasksRoundTripWithTheDecisionToPublish() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        var group = DownloadGroupRecord(
            id: 4, owner: 1000, app: "org.example.App", session: "org.example.App\u{1F}s", title: "maps",
            atomic: true, taskSignals: false)
        group.parallel = 3
        group.maxBytesPerSecond = 1 << 40
        var task = DownloadTaskRecord(
            id: 9, owner: 1000, session: group.session, url: "http://127.0.0.1/t", destination: "/tmp/t9",
            destinationIsDirectory: false, options: DownloadOptions()
        )
        task.group = group.id
        XCTAssertEqual(
            store.commit([store.insertingGroup(group), try store.inserting(task)]).filter { (try? $0.get()) == nil }
                .count, 0)
        XCTAssertEqual(try store.loadGroups(), [group])
        XCTAssertEqual(try store.loadTasks().tasks.map(\.group), [4])

        _ = store.commit([store.publishingGroup(group.id)])
        var decided = group
        decided.publishing = true
        // What a restart finds: the decision stands.
        XCTAssertEqual(try DownloadStore(DatabaseQueue(path: path), secrets: .forTests).loadGroups(), [decided])

        _ = store.commit([store.deletingGroup(group.id)])
        XCTAssertEqual(try store.loadGroups(), [])
    }

    func testTasksStoredBeforeGroupsBelongToNone() throws {
        let queue = try DatabaseQueue(path: path)
        try DownloadStore.migrator.migrate(queue, upTo: "v8-apps")
        try queue.write { db in
            try db.execute(sql: "INSERT INTO session (ownerUID, name, endedSinceCall) VALUES (1000, 'old', 0)")
            try db.execute(
                sql: """
                    INSERT INTO task (id, ownerUID, session, url, destination, destinationIsDirectory, state, durableOffset,
                                      expectedLength, options, createdAt, updatedAt)
                    VALUES (3, 1000, 'old', 'http://127.0.0.1/x', '/tmp/x', 0, 'paused', 10, 100, '{}',
                            '2026-01-01 00:00:00', '2026-01-01 00:00:00')
                    """)
        }
        let store = try DownloadStore(queue, secrets: .forTests)
        XCTAssertEqual(try store.loadTasks().tasks.map(\.group), [0])
        XCTAssertEqual(try store.loadGroups(), [])
    }
}
