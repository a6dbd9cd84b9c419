import CrashPoints
import DownloadModel
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
    /// Seals and opens the secrets of a task's options (`StoreSecrets`).
    let secrets: StoreSecrets
    /// Where the database lives, for messages.
    public let directory: String
    /// The engine's saves (inserts, state changes, checkpoints), committed together when they
    /// are delivered together.
    private let saves: CommitGroup

    /// Opens (creating) `path` as a WAL database; fails with a readable error if it cannot.
    public convenience init(path: String, secrets: StoreSecrets) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try self.init(
            DatabasePool(path: path, configuration: DownloadStore.configuration), secrets: secrets,
            reserve: StorageReserve(directory: directory), directory: directory
        )
    }

    /// Uses `database` (a `DatabaseQueue` on a temporary file in tests), migrates it, and seals
    /// what rows written before `StoreSecrets` keep in clear.
    public init(
        _ database: any DatabaseWriter, secrets: StoreSecrets, reserve: StorageReserve? = nil, directory: String = ""
    ) throws {
        self.database = database
        self.secrets = secrets
        self.reserve = reserve
        self.directory = directory
        saves = CommitGroup(database: database) { write in
            try DownloadStore.write(
                database, reserve: reserve, directory: directory, mayUseReserve: write.mayUseReserve, write.body)
        }
        try DownloadStore.migrator.migrate(database)
        try sealClearSecrets()
        _ = reserve?.ensure()
    }

    /// The engine's saves so far, and the transactions that committed them (group commit).
    public var saveCounts: (writes: Int, transactions: Int) { (saves.writes, saves.commits) }

    /// Moves the write-ahead log into the database and empties it (at the daemon's exit: the
    /// next start reads one file, and an idle user's state is not a growing WAL).
    public func checkpoint() throws {
        try database.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
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
        try DownloadStore.write(database, reserve: reserve, directory: directory, mayUseReserve: mayUseReserve, body)
    }

    private static func write<T>(
        _ database: any DatabaseWriter, reserve: StorageReserve?, directory: String, mayUseReserve: Bool,
        _ body: (Database) throws -> T
    ) throws -> T {
        func full(_ error: DatabaseError) -> StoreError {
            StoreError(
                "the state directory \(directory) is full (\(error.message ?? "SQLITE_FULL"))", storageFull: true)
        }
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

    public static var configuration: Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        // Content an update or delete leaves behind (an ended task's erased credentials) is
        // zeroed where that costs no extra I/O, not left in the file's free space.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA secure_delete = FAST") }
        return configuration
    }

    // MARK: Tasks

    /// Commits `writes` (`inserting`, `saving`) in one transaction, in order: each write's
    /// result (a group that fails is made again write by write, so a failure is its own).
    public func commit(_ writes: [StoreWrite]) -> [Result<Void, any Error>] {
        saves.commit(writes)
    }

    private func commitAlone(_ write: StoreWrite) throws {
        try saves.commit([write]).first?.get()
    }

    /// Records a new task (and its session) under the id the engine gave it.
    public func insertTask(_ record: DownloadTaskRecord) throws {
        try commitAlone(inserting(record))
    }

    /// Saves what the engine knows of a task now: `saving`'s write, committed alone.
    public func save(
        _ record: DownloadTaskRecord, options: Bool = true, mayUseReserve: Bool = true, sessionIdle: Bool = false
    ) throws {
        try commitAlone(saving(record, options: options, mayUseReserve: mayUseReserve, sessionIdle: sessionIdle))
    }

    /// The write that records a new task (and its session) under the id the engine gave it.
    /// Cached statements, as `saving`: one insert per Start.
    public func inserting(_ record: DownloadTaskRecord) throws -> StoreWrite {
        let row = try TaskRow(record: record, secrets: secrets)
        return StoreWrite(mayUseReserve: true) { db in
            try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO session (ownerUID, name, endedSinceCall) VALUES (?, ?, 0)"
            )
            .execute(arguments: [row.ownerUID, row.session])
            try db.cachedStatement(
                sql: """
                    INSERT INTO task (id, ownerUID, session, url, finalURL, destination, destinationIsDirectory, resolvedPath,
                    state, durableOffset, expectedLength, validator, options, errorName, errorMessage, partialDevice, partialInode,
                    fileMode, createdAt, updatedAt, endedAt, app, writesInPlace, groupID, upload, replyBody)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                row.id, row.ownerUID, row.session, row.url, row.finalURL, row.destination, row.destinationIsDirectory,
                row.resolvedPath, row.state, row.durableOffset, row.expectedLength, row.validator, row.options,
                row.errorName,
                row.errorMessage, row.partialDevice, row.partialInode, row.fileMode, StoredTime.text(row.createdAt),
                StoredTime.text(row.updatedAt), row.endedAt.map(StoredTime.text), row.app, row.writesInPlace,
                row.groupID,
                row.upload, row.replyBody,
            ])
            try DownloadStore.saveSegments(record, db)
        }
    }

    /// The write that saves what the engine knows of a task now (state, durable offset,
    /// validator, options…).
    /// When the task has just ended, its session counts it towards the next completion call,
    /// in the same transaction; and when this change leaves the session with nothing active
    /// (`sessionIdle`: the engine says so, and the rows agree), the completion call it makes due
    /// is written in that transaction too, so no kill can come between the end and the call.
    /// `options`: whether the options changed (they are encoded only then: a save per state
    /// change and checkpoint is the per-task cost of every download, see Benchmarks/RESULTS.md).
    /// Cached statements, no row fetched: about a fifth of the CPU the record round trip took.
    public func saving(
        _ record: DownloadTaskRecord, options: Bool = true, mayUseReserve: Bool = true, sessionIdle: Bool = false
    ) throws -> StoreWrite {
        let encodedOptions = options ? try TaskRow.encode(record.options, task: record.id, secrets: secrets) : nil
        // An upload's reply changes only as it ends; a download has none (NULL, nothing encoded).
        let (upload, replyBody) = try TaskRow.encode(record.upload)
        // Where its time went, at each change of state (not each checkpoint of a running task).
        let metrics = record.state == .running ? nil : try record.metrics.map(TaskRow.encode)
        let now = StoredTime.now
        return StoreWrite(mayUseReserve: mayUseReserve) { db in
            let id = Int64(record.id)
            if record.state.isTerminal {
                // Counted once, when the task ends (its endedAt is still empty), in the same transaction.
                try db.cachedStatement(
                    sql: """
                        UPDATE session SET endedSinceCall = endedSinceCall + 1 WHERE ownerUID = ? AND name = ?
                        AND EXISTS (SELECT 1 FROM task WHERE id = ? AND endedAt IS NULL)
                        """
                ).execute(arguments: [Int64(record.owner), record.session, id])
            }
            try db.cachedStatement(
                sql: """
                    UPDATE task SET options = coalesce(?, options), url = ?, finalURL = ?, resolvedPath = ?, state = ?,
                    durableOffset = ?, expectedLength = ?, validator = ?, errorName = ?, errorMessage = ?,
                    partialDevice = ?, partialInode = ?, fileMode = ?, groupID = ?, upload = ?, replyBody = coalesce(?, replyBody),
                    metrics = coalesce(?, metrics), responseStatus = ?, lastModified = ?, updatedAt = ?,
                    endedAt = CASE WHEN ? THEN coalesce(endedAt, ?) ELSE NULL END
                    WHERE id = ?
                    """
            ).execute(arguments: [
                encodedOptions, record.url, record.finalURL, record.resolvedPath, record.state.rawValue,
                max(0, record.durableOffset), max(-1, record.expectedLength), record.validator, record.errorName,
                record.errorMessage, record.partialFile.map { Int64(bitPattern: $0.device) },
                record.partialFile.map { Int64(bitPattern: $0.inode) }, record.fileMode.map { Int64($0) },
                Int64(record.group), upload, replyBody, metrics, record.responseStatus.map { Int64($0) },
                record.lastModified, now,
                record.state.isTerminal, now, id,
            ])
            guard db.changesCount > 0 else { return }
            if replyBody?.isEmpty == false { try DownloadStore.keepRepliesWithinBudget(owner: record.owner, db) }
            try DownloadStore.saveSegments(record, db)
            if record.segments?.isEmpty == false { CrashPoint.segmentsSaving.reached() }
            if sessionIdle && !record.state.isActive {
                let active =
                    try Bool.fetchOne(
                        db,
                        sql: """
                            SELECT EXISTS (SELECT 1 FROM task WHERE ownerUID = ? AND session = ? AND state IN \(DownloadStore.activeStates))
                            """, arguments: [Int64(record.owner), record.session]) ?? true
                if !active { try DownloadStore.makeCompletionDue(record.sessionID, db) }
            }
        }
    }

    /// `DownloadState.isActive` as an SQL list: `('queued', 'running', 'retrying')`.
    private static let activeStates =
        "(" + DownloadState.allCases.filter(\.isActive).map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")"

    /// Turns the ends a session counts into a pending completion call, to be announced
    /// (`EventsFinished`) and made: the counter goes back to zero; an undelivered call stays one
    /// call, announced again. Returns whether there were ends to count.
    @discardableResult
    private static func makeCompletionDue(_ session: SessionID, _ db: Database) throws -> Bool {
        try db.cachedStatement(
            sql: "UPDATE session SET endedSinceCall = 0 WHERE ownerUID = ? AND name = ? AND endedSinceCall > 0"
        )
        .execute(arguments: [Int64(session.owner), session.name])
        guard db.changesCount > 0 else { return false }
        try db.cachedStatement(
            sql: """
                INSERT INTO pendingCompletion (ownerUID, session, createdAt, announced) VALUES (?, ?, ?, 0)
                ON CONFLICT (ownerUID, session) DO UPDATE SET announced = 0
                """
        ).execute(arguments: [Int64(session.owner), session.name, StoredTime.now])
        return true
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
            // Every column but the replies' bodies: they are read one at a time, on `GetReply`.
            var loader = TaskLoader(secrets: secrets)
            let rows = try Row.fetchCursor(db, sql: "SELECT \(TaskLoader.columns) FROM task ORDER BY id")
            while let row = try rows.next() {
                let id: Int64 = row[0] ?? 0
                do {
                    var record = try loader.record(row)
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

    // MARK: Groups

    /// The write that records a new group (before its tasks' inserts, in the same batch).
    public func insertingGroup(_ group: DownloadGroupRecord) -> StoreWrite {
        StoreWrite(mayUseReserve: true) { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO taskGroup (id, ownerUID, app, session, title, atomic, taskSignals, publishing, createdAt, parallel,
                                           maxBytesPerSecond)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                Int64(group.id), Int64(group.owner), group.app, group.session, group.title, group.atomic,
                group.taskSignals,
                group.publishing, StoredTime.now, Int64(group.parallel), Int64(clamping: group.maxBytesPerSecond),
            ])
        }
    }

    /// The write that records an atomic group's decision to publish every file (or, `false`,
    /// that it was undone).
    public func publishingGroup(_ id: UInt64, _ publishing: Bool = true) -> StoreWrite {
        StoreWrite(mayUseReserve: true) { db in
            try db.cachedStatement(sql: "UPDATE taskGroup SET publishing = ? WHERE id = ?").execute(arguments: [
                publishing, Int64(id),
            ])
        }
    }

    public func deletingGroup(_ id: UInt64) -> StoreWrite {
        StoreWrite(mayUseReserve: true) { db in
            try db.cachedStatement(sql: "DELETE FROM taskGroup WHERE id = ?").execute(arguments: [Int64(id)])
        }
    }

    /// Every group in id order (a row that cannot be one is left out and logged by the caller's
    /// tasks: their group id then names nothing, and they run as tasks of their own).
    public func loadGroups() throws -> [DownloadGroupRecord] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM taskGroup ORDER BY id").compactMap { row -> DownloadGroupRecord? in
                let id: Int64 = row["id"]
                let owner: Int64 = row["ownerUID"]
                guard id > 0, let uid = UInt32(exactly: owner) else { return nil }
                var group = DownloadGroupRecord(
                    id: UInt64(id), owner: uid, app: row["app"], session: row["session"], title: row["title"],
                    atomic: row["atomic"], taskSignals: row["taskSignals"]
                )
                group.publishing = row["publishing"]
                let parallel: Int64 = row["parallel"]
                let rate: Int64 = row["maxBytesPerSecond"]
                group.parallel = Int(clamping: max(0, parallel))
                group.maxBytesPerSecond = UInt64(max(0, rate))
                return group
            }
        }
    }

    /// The task's rows of `segment` say what `record.segments` says (in the caller's transaction).
    private static func saveSegments(_ record: DownloadTaskRecord, _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM segment WHERE taskID = ?").execute(arguments: [Int64(record.id)])
        for range in record.segments ?? [] {
            try db.cachedStatement(sql: "INSERT INTO segment (taskID, start, \"end\") VALUES (?, ?, ?)")
                .execute(arguments: [Int64(record.id), range.start, range.end])
        }
    }

    public func deleteTask(_ id: UInt64) throws {
        try commitAlone(deleting(id))
    }

    /// The write that deletes task `id` (its segments go with it). A cached statement, as
    /// `saving`: the query interface built its SQL again for every removal.
    public func deleting(_ id: UInt64) -> StoreWrite {
        StoreWrite(mayUseReserve: true) { db in
            try db.cachedStatement(sql: "DELETE FROM task WHERE id = ?").execute(arguments: [Int64(id)])
        }
    }

    /// Ended tasks whose end is older than `date`.
    public func endedTasks(before date: Date) throws -> [UInt64] {
        try database.read { db in
            try Int64.fetchAll(
                db, sql: "SELECT id FROM task WHERE endedAt IS NOT NULL AND endedAt < ?", arguments: [date]
            )
            .map { UInt64($0) }
        }
    }

    // MARK: Sessions and completion handlers

    /// The session has nothing left to do. Ends it still counts (the engine and the rows
    /// disagreed when they were saved) become a pending completion call now; a pending call not
    /// yet announced is a transition (`EventsFinished` goes out once per transition), marked
    /// announced here. Returns whether it was a transition, and whether a call is pending now.
    public func sessionBecameIdle(_ session: SessionID) throws -> (transition: Bool, pending: Bool) {
        try write { db in
            try DownloadStore.makeCompletionDue(session, db)
            guard let row = try PendingCompletionRow.fetchOne(db, key: DownloadStore.pendingKey(session)) else {
                return (false, false)
            }
            guard !row.announced else { return (false, true) }
            try db.cachedStatement(sql: "UPDATE pendingCompletion SET announced = 1 WHERE ownerUID = ? AND session = ?")
                .execute(arguments: [Int64(session.owner), session.name])
            return (true, true)
        }
    }

    /// Sessions with a pending completion call whose `EventsFinished` did not go out (a kill
    /// came between the end that made it due and its announcement).
    public func unannouncedCompletions() throws -> [SessionID] {
        try database.read { db in
            try PendingCompletionRow.filter(Column("announced") == false).fetchAll(db)
                .map { SessionID(owner: UInt32($0.ownerUID), name: $0.session) }
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
            try SessionRow.filter(Column("endedSinceCall") > 0).fetchAll(db).map {
                SessionID(owner: UInt32($0.ownerUID), name: $0.name)
            }
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
            try SessionRow(ownerUID: Int64(handler.owner), name: handler.session, endedSinceCall: 0).insert(
                db, onConflict: .ignore)
            try HandlerRow(handler).save(db)
        }
    }

    public func handler(_ session: SessionID) throws -> CompletionHandler? {
        try database.read { db in try HandlerRow.fetchOne(db, key: DownloadStore.pendingKey(session))?.handler }
    }

    public func handlerCount(owner: UInt32) throws -> Int {
        try database.read { db in try HandlerRow.filter(Column("ownerUID") == Int64(owner)).fetchCount(db) }
    }

    /// The handlers of `owner` whose session's stored name starts with `prefix` (one sandboxed
    /// app's: `APPID` U+001F; compared as bytes, so no LIKE wildcard applies).
    public func handlerCount(owner: UInt32, sessionPrefix prefix: String) throws -> Int {
        try database.read { db in
            try HandlerRow.filter(Column("ownerUID") == Int64(owner))
                .filter(sql: "substr(session, 1, ?) = ?", arguments: [prefix.count, prefix])
                .fetchCount(db)
        }
    }
}

extension DownloadStore {
    /// What the replies kept for `GetReply` may take of one user's share of the database: when a
    /// new one would pass it, the oldest are dropped (their status and headers stay; `GetReply`
    /// then gives an empty body).
    public static let maxReplyBytesPerOwner = 64 << 20

    /// Drops `owner`'s oldest kept replies beyond `maxReplyBytesPerOwner` (in the transaction of
    /// the write that kept a new one).
    static func keepRepliesWithinBudget(owner: UInt32, _ db: Database) throws {
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT id, length(replyBody) AS size FROM task WHERE ownerUID = ? AND length(replyBody) > 0
                ORDER BY coalesce(endedAt, updatedAt) DESC, id DESC
                """, arguments: [Int64(owner)])
        var total = 0
        var dropped: [Int64] = []
        for row in rows {
            let size: Int = row["size"]
            total += size
            if total > maxReplyBytesPerOwner { dropped.append(row["id"]) }
        }
        for id in dropped {
            try db.cachedStatement(sql: "UPDATE task SET replyBody = NULL WHERE id = ?").execute(arguments: [id])
        }
    }

    /// The body of task `id`'s reply as kept for `GetReply` (empty: none, or dropped for the budget).
    /// When the task was made (its row written), for `GetMetrics`' `queued_at`; nil: no row.
    public func createdAt(of id: UInt64) throws -> Date? {
        try database.read { db in
            try Date.fetchOne(db, sql: "SELECT createdAt FROM task WHERE id = ?", arguments: [Int64(id)])
        }
    }

    public func replyBody(of id: UInt64) throws -> [UInt8] {
        try database.read { db in
            let data = try Data.fetchOne(db, sql: "SELECT replyBody FROM task WHERE id = ?", arguments: [Int64(id)])
            return data.map { Array($0) } ?? []
        }
    }
}
