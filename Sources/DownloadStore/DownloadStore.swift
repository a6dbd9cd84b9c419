import CrashPoints
import DownloadEngine
import Foundation
import GRDB

/// The daemon's state in one SQLite file (WAL): sessions, tasks with their durable checkpoints,
/// registered completion handlers and pending completion calls. Owns the database, runs the
/// migrations when opened, and groups the writes that keep its invariants (the shape of GRDB's
/// `AppDatabase`). Engine state reaches it only through `StoreObserver`.
public final class DownloadStore: Sendable {
    let database: any DatabaseWriter
    /// Room released when the disk is full so the write can still be made (see `StorageReserve`).
    public let reserve: StorageReserve?
    /// Where the database lives, for messages.
    public let directory: String

    /// Opens (creating) `path` as a WAL database; fails with a readable error if it cannot.
    public convenience init(path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try self.init(
            DatabasePool(path: path, configuration: DownloadStore.configuration),
            reserve: StorageReserve(directory: directory), directory: directory
        )
    }

    /// Uses `database` (a `DatabaseQueue` on a temporary file in tests) and migrates it.
    public init(_ database: any DatabaseWriter, reserve: StorageReserve? = nil, directory: String = "") throws {
        self.database = database
        self.reserve = reserve
        self.directory = directory
        try DownloadStore.migrator.migrate(database)
        _ = reserve?.ensure()
    }

    /// Free bytes new work needs beside the reserve.
    public static let minimumFree: Int64 = 1 << 20

    /// Whether a call may go ahead. New work (Start, Resume, ResumeWithData, a completion
    /// handler) needs the reserve in place (made again if it was released) and some free space
    /// beside it; a call that only ends or holds work (Cancel, Pause) needs either, since the
    /// reserve is there to record exactly that. A call asks first, so a full disk refuses it
    /// before anything changes.
    public func hasRoom(forNewWork: Bool) -> Bool {
        guard let reserve else { return true }
        let reserved = reserve.ensure()
        var info = statvfs()
        let free = statvfs(directory, &info) == 0 ? Int64(info.f_bavail) * Int64(info.f_frsize) : Int64.max
        return forNewWork ? reserved && free >= Self.minimumFree : reserved || free >= Self.minimumFree
    }

    /// Every write: on SQLITE_FULL the reserve is released (when `mayUseReserve`) and the write
    /// tried once more; if it fails again, a `StoreError` with `isStorageFull`. Checkpoints do not
    /// use the reserve: it is kept for the state changes (a pause, a failure) that follow.
    func write<T>(mayUseReserve: Bool = true, _ body: (Database) throws -> T) throws -> T {
        do {
            return try database.write(body)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
            guard mayUseReserve, reserve?.release() == true else { throw full(error) }
            do {
                return try database.write(body)
            } catch let again as DatabaseError where again.resultCode == .SQLITE_FULL {
                throw full(again)
            }
        }
    }

    private func full(_ error: DatabaseError) -> StoreError {
        StoreError("the state directory \(directory) is full (\(error.message ?? "SQLITE_FULL"))", storageFull: true)
    }

    public static var configuration: Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        return configuration
    }

    // MARK: Tasks

    /// Records a new task (and its session) under the id the engine gave it.
    public func insertTask(_ record: DownloadTaskRecord) throws {
        try write { db in
            try SessionRow(ownerUID: Int64(record.owner), name: record.session, endedSinceCall: 0).insert(db, onConflict: .ignore)
            var row = try TaskRow(record: record)
            try row.insert(db)
            try DownloadStore.saveSegments(record, db)
        }
    }

    /// Saves what the engine knows of a task now (state, durable offset, validator, options…).
    /// When the task has just ended, its session counts it towards the next completion call,
    /// in the same transaction.
    public func save(_ record: DownloadTaskRecord, mayUseReserve: Bool = true) throws {
        try write(mayUseReserve: mayUseReserve) { db in
            guard var row = try TaskRow.fetchOne(db, key: Int64(record.id)) else { return }
            let ended = try row.update(from: record)
            try row.update(db)
            try DownloadStore.saveSegments(record, db)
            if record.segments?.isEmpty == false { CrashPoint.segmentsSaving.reached() }
            if ended {
                try db.execute(
                    sql: "UPDATE session SET endedSinceCall = endedSinceCall + 1 WHERE ownerUID = ? AND name = ?",
                    arguments: [row.ownerUID, row.session]
                )
            }
        }
    }

    /// Every readable task in id order, the rows that are not (kept in the database as they
    /// are, for a person to look at), and the id after the highest one ever given.
    public func loadTasks() throws -> (tasks: [DownloadTaskRecord], rejected: [RejectedTask], nextID: UInt64) {
        try database.read { db in
            var tasks: [DownloadTaskRecord] = []
            var rejected: [RejectedTask] = []
            var segments: [Int64: [ByteRange]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT taskID, start, \"end\" FROM segment ORDER BY taskID, start") {
                segments[row["taskID"], default: []].append(ByteRange(start: row["start"], end: row["end"]))
            }
            for row in try Row.fetchAll(db, sql: "SELECT * FROM task ORDER BY id") {
                let id: Int64 = row["id"] ?? 0
                do {
                    var record = try TaskRow(row: row).record()
                    if let ranges = segments[id] {
                        guard ByteRange.valid(ranges, length: record.expectedLength) else {
                            throw StoreError("its segments do not fit a file of \(record.expectedLength) bytes")
                        }
                        record.segments = ranges
                    }
                    tasks.append(record)
                } catch {
                    rejected.append(RejectedTask(id: id, reason: "\(error)"))
                }
            }
            // AUTOINCREMENT remembers the highest id ever used, so a removed task's id is never given again.
            let highest = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'task'") ?? 0
            return (tasks, rejected, UInt64(max(0, highest)) + 1)
        }
    }

    /// The task's rows of `segment` say what `record.segments` says (in the caller's transaction).
    private static func saveSegments(_ record: DownloadTaskRecord, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM segment WHERE taskID = ?", arguments: [Int64(record.id)])
        for range in record.segments ?? [] {
            try db.execute(
                sql: "INSERT INTO segment (taskID, start, \"end\") VALUES (?, ?, ?)",
                arguments: [Int64(record.id), range.start, range.end]
            )
        }
    }

    public func deleteTask(_ id: UInt64) throws {
        _ = try write { db in try TaskRow.deleteOne(db, key: Int64(id)) }
    }

    /// Ended tasks whose end is older than `date`.
    public func endedTasks(before date: Date) throws -> [UInt64] {
        try database.read { db in
            try Int64.fetchAll(db, sql: "SELECT id FROM task WHERE endedAt IS NOT NULL AND endedAt < ?", arguments: [date])
                .map { UInt64($0) }
        }
    }

    // MARK: Sessions and completion handlers

    /// The session has nothing left to do. If any task ended since the last call, this is a
    /// transition: a completion call becomes pending (exactly one per transition).
    /// Returns whether it was a transition, and whether a call is pending now.
    public func sessionBecameIdle(_ session: SessionID) throws -> (transition: Bool, pending: Bool) {
        try write { db in
            let key: [String: any DatabaseValueConvertible] = ["ownerUID": Int64(session.owner), "name": session.name]
            guard var row = try SessionRow.fetchOne(db, key: key) else { return (false, false) }
            let transition = row.endedSinceCall > 0
            if transition {
                row.endedSinceCall = 0
                try row.update(db)
                try PendingCompletionRow(ownerUID: Int64(session.owner), session: session.name, createdAt: Date())
                    .insert(db, onConflict: .ignore)
            }
            let pending = try PendingCompletionRow.fetchOne(db, key: DownloadStore.pendingKey(session)) != nil
            return (transition, pending)
        }
    }

    private static func pendingKey(_ session: SessionID) -> [String: any DatabaseValueConvertible] {
        ["ownerUID": Int64(session.owner), "session": session.name]
    }

    public func isPending(_ session: SessionID) throws -> Bool {
        try database.read { db in try PendingCompletionRow.fetchOne(db, key: DownloadStore.pendingKey(session)) != nil }
    }

    /// The completion handler replied: the call is done.
    public func completionDelivered(_ session: SessionID) throws {
        _ = try write { db in try PendingCompletionRow.deleteOne(db, key: DownloadStore.pendingKey(session)) }
    }

    /// Sessions that count ended tasks not yet turned into a completion call: what a kill between
    /// a task's end (saved with its count) and the session's idle step leaves.
    public func sessionsWithUnreportedEnds() throws -> [SessionID] {
        try database.read { db in
            try SessionRow.filter(Column("endedSinceCall") > 0).fetchAll(db).map { SessionID(owner: UInt32($0.ownerUID), name: $0.name) }
        }
    }

    public func pendingCompletions() throws -> [SessionID] {
        try database.read { db in
            try PendingCompletionRow.fetchAll(db).map { SessionID(owner: UInt32($0.ownerUID), name: $0.session) }
        }
    }

    /// Registers (replacing) the handler of a session.
    public func registerHandler(_ handler: CompletionHandler) throws {
        try write { db in
            try SessionRow(ownerUID: Int64(handler.owner), name: handler.session, endedSinceCall: 0).insert(db, onConflict: .ignore)
            try HandlerRow(handler).save(db)
        }
    }

    public func handler(_ session: SessionID) throws -> CompletionHandler? {
        try database.read { db in try HandlerRow.fetchOne(db, key: DownloadStore.pendingKey(session))?.handler }
    }

    public func handlerCount(owner: UInt32) throws -> Int {
        try database.read { db in try HandlerRow.filter(Column("ownerUID") == Int64(owner)).fetchCount(db) }
    }
}
