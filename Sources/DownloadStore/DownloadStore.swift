import DownloadEngine
import Foundation
import GRDB

/// The daemon's state in one SQLite file (WAL): sessions, tasks with their durable checkpoints,
/// registered completion handlers and pending completion calls. Owns the database, runs the
/// migrations when opened, and groups the writes that keep its invariants.
public final class DownloadStore: Sendable {
    let database: DatabasePool

    /// Opens (creating) `path`; fails with a readable error if it cannot.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        database = try DatabasePool(path: path, configuration: configuration)
        try DownloadStore.migrator.migrate(database)
    }

    // MARK: Tasks

    /// Records a new task (and its session) and returns its id; the record's `id` is ignored.
    public func createTask(_ record: DownloadTaskRecord, owner: UInt32) throws -> UInt64 {
        try database.write { db in
            try SessionRow(ownerUID: Int64(owner), name: record.session, endedSinceCall: 0).insert(db, onConflict: .ignore)
            var row = try TaskRow(record: record, owner: owner)
            row.id = nil
            try row.insert(db)
            guard let id = row.id else { throw DatabaseError(message: "no id for the new task") }
            return UInt64(id)
        }
    }

    /// Saves what the engine knows of a task now (state, durable offset, validator…).
    public func save(_ record: DownloadTaskRecord) throws {
        try database.write { db in
            guard var row = try TaskRow.fetchOne(db, key: Int64(record.id)) else { return }
            row.update(from: record)
            try row.update(db)
        }
    }

    /// Every task, with its owner, in id order.
    public func loadTasks() throws -> [(owner: UInt32, record: DownloadTaskRecord)] {
        try database.read { db in
            try TaskRow.order(Column("id")).fetchAll(db).map { (UInt32($0.ownerUID), try $0.record()) }
        }
    }

    public func deleteTask(_ id: UInt64) throws {
        _ = try database.write { db in try TaskRow.deleteOne(db, key: Int64(id)) }
    }

    /// Ended tasks whose end is older than `date`.
    public func endedTasks(before date: Date) throws -> [UInt64] {
        try database.read { db in
            try Int64.fetchAll(db, sql: "SELECT id FROM task WHERE endedAt IS NOT NULL AND endedAt < ?", arguments: [date])
                .map { UInt64($0) }
        }
    }

    public func taskCount(owner: UInt32) throws -> Int {
        try database.read { db in try TaskRow.filter(Column("ownerUID") == Int64(owner)).fetchCount(db) }
    }

    // MARK: Sessions and completion handlers

    /// A task of the session ended: counts towards the next completion call.
    public func noteTaskEnded(owner: UInt32, session: String) throws {
        try database.write { db in
            try db.execute(
                sql: "UPDATE session SET endedSinceCall = endedSinceCall + 1 WHERE ownerUID = ? AND name = ?",
                arguments: [Int64(owner), session]
            )
        }
    }

    /// The session has nothing left to do. If any task ended since the last call, this is a
    /// transition: a completion call becomes pending (exactly one per transition).
    /// Returns whether it was a transition, and whether a call is pending now.
    public func sessionBecameIdle(owner: UInt32, session: String) throws -> (transition: Bool, pending: Bool) {
        try database.write { db in
            guard var row = try SessionRow.fetchOne(db, key: ["ownerUID": Int64(owner), "name": session]) else {
                return (false, false)
            }
            let transition = row.endedSinceCall > 0
            if transition {
                row.endedSinceCall = 0
                try row.update(db)
                try PendingCompletionRow(ownerUID: Int64(owner), session: session, createdAt: Date()).insert(db, onConflict: .ignore)
            }
            let pending = try PendingCompletionRow.fetchOne(db, key: ["ownerUID": Int64(owner), "session": session]) != nil
            return (transition, pending)
        }
    }

    public func isPending(owner: UInt32, session: String) throws -> Bool {
        try database.read { db in
            try PendingCompletionRow.fetchOne(db, key: ["ownerUID": Int64(owner), "session": session]) != nil
        }
    }

    /// The completion handler replied: the call is done.
    public func completionDelivered(owner: UInt32, session: String) throws {
        _ = try database.write { db in
            try PendingCompletionRow.deleteOne(db, key: ["ownerUID": Int64(owner), "session": session])
        }
    }

    public func pendingCompletions() throws -> [(owner: UInt32, session: String)] {
        try database.read { db in
            try PendingCompletionRow.fetchAll(db).map { (UInt32($0.ownerUID), $0.session) }
        }
    }

    /// Registers (replacing) the handler of a session.
    public func registerHandler(_ handler: CompletionHandler) throws {
        try database.write { db in
            try SessionRow(ownerUID: Int64(handler.owner), name: handler.session, endedSinceCall: 0).insert(db, onConflict: .ignore)
            try HandlerRow(handler).save(db)
        }
    }

    public func handler(owner: UInt32, session: String) throws -> CompletionHandler? {
        try database.read { db in
            try HandlerRow.fetchOne(db, key: ["ownerUID": Int64(owner), "session": session])?.handler
        }
    }
}
