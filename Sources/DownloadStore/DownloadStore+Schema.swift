import CrashPoints
import Foundation
import GRDB

extension DownloadStore {
    /// Shipped migrations are never edited: add a new one instead. Documented in data/schema.md.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(
            "v1",
            migrate: Self.crashable { db in
                try db.create(table: "session") { t in
                    t.column("ownerUID", .integer).notNull().check { $0 >= 0 }
                    t.column("name", .text).notNull().check { length($0) > 0 }
                    t.column("endedSinceCall", .integer).notNull().defaults(to: 0).check { $0 >= 0 }
                    t.primaryKey(["ownerUID", "name"])
                }
                try db.create(table: "task") { t in
                    t.autoIncrementedPrimaryKey("id")
                    t.column("ownerUID", .integer).notNull()
                    t.column("session", .text).notNull()
                    t.column("url", .text).notNull()
                    t.column("finalURL", .text)
                    t.column("destination", .text).notNull().check { $0.like("/%") }
                    t.column("destinationIsDirectory", .boolean).notNull()
                    t.column("resolvedPath", .text)
                    t.column("state", .text).notNull()
                        .check {
                            ["queued", "running", "paused", "retrying", "finished", "failed", "cancelled"].contains($0)
                        }
                    t.column("durableOffset", .integer).notNull().check { $0 >= 0 }
                    t.column("expectedLength", .integer).notNull().check { $0 >= -1 }
                    t.column("validator", .text)
                    t.column("options", .text).notNull()
                    t.column("errorName", .text)
                    t.column("errorMessage", .text)
                    t.column("createdAt", .datetime).notNull()
                    t.column("updatedAt", .datetime).notNull()
                    t.column("endedAt", .datetime)
                    t.foreignKey(["ownerUID", "session"], references: "session", onDelete: .cascade)
                }
                try db.create(index: "task_owner", on: "task", columns: ["ownerUID", "session"])
                try db.create(table: "handler") { t in
                    t.column("ownerUID", .integer).notNull()
                    t.column("session", .text).notNull()
                    t.column("connection", .text).notNull()
                    t.column("objectPath", .text).notNull().check { $0.like("/%") }
                    t.column("busName", .text)
                    t.primaryKey(["ownerUID", "session"])
                    t.foreignKey(["ownerUID", "session"], references: "session", onDelete: .cascade)
                }
                try db.create(table: "pendingCompletion") { t in
                    t.column("ownerUID", .integer).notNull()
                    t.column("session", .text).notNull()
                    t.column("createdAt", .datetime).notNull()
                    t.primaryKey(["ownerUID", "session"])
                    t.foreignKey(["ownerUID", "session"], references: "session", onDelete: .cascade)
                }
            })
        // Options were the synthesized Codable JSON of a Swift struct (camelCase property names);
        // from v2 they use the documented snake_case keys of the D-Bus options. Written with
        // plain JSON values, not app types, so it keeps meaning what it means today.
        migrator.registerMigration(
            "v2-options-keys",
            migrate: Self.crashable { db in
                let renamed = [
                    "maxBytesPerSecond": "max_bytes_per_second", "connectTimeout": "connect_timeout",
                    "stallTimeout": "stall_timeout", "resourceTimeout": "resource_timeout",
                    "allowMetered": "allow_metered",
                ]
                let rows = try Row.fetchAll(db, sql: "SELECT id, options FROM task")
                for row in rows {
                    let id: Int64 = row["id"]
                    let text: String = row["options"]
                    guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
                        continue  // left as it is: the daemon reports the row and keeps it aside
                    }
                    var converted: [String: Any] = [:]
                    for (key, value) in object {
                        converted[renamed[key] ?? key] = value
                    }
                    if (converted["headers"] as? [String: Any])?.isEmpty == true { converted["headers"] = nil }
                    if converted["priority"] as? String == "normal" { converted["priority"] = nil }
                    if converted["max_bytes_per_second"] as? Int == 0 { converted["max_bytes_per_second"] = nil }
                    if converted["overwrite"] as? Bool == false { converted["overwrite"] = nil }
                    let data = try JSONSerialization.data(
                        withJSONObject: converted, options: [.sortedKeys, .withoutEscapingSlashes])
                    try db.execute(
                        sql: "UPDATE task SET options = ? WHERE id = ?",
                        arguments: [String(decoding: data, as: UTF8.self), id])
                }
            })
        // Unique names are unique within one bus instance only: remember which one.
        migrator.registerMigration(
            "v3-handler-bus-id",
            migrate: Self.crashable { db in
                try db.alter(table: "handler") { t in t.add(column: "busID", .text) }
            })
        // The partial file a task created (only that file is resumed or published) and the
        // finished file's mode (from the caller's umask).
        migrator.registerMigration(
            "v4-partial-identity",
            migrate: Self.crashable { db in
                try db.alter(table: "task") { t in
                    t.add(column: "partialDevice", .integer)
                    t.add(column: "partialInode", .integer)
                    t.add(column: "fileMode", .integer).check { $0 == nil || ($0 >= 0 && $0 <= 0o777) }
                }
            })
        // A segmented download's ranges still to fetch, one row each (none for one stream).
        migrator.registerMigration(
            "v5-segments",
            migrate: Self.crashable { db in
                try db.create(table: "segment") { t in
                    t.column("taskID", .integer).notNull().references("task", onDelete: .cascade)
                    t.column("start", .integer).notNull().check { $0 >= 0 }
                    t.column("end", .integer).notNull()
                    t.primaryKey(["taskID", "start"])
                    t.check(sql: "\"end\" > start")
                }
            })
        // v1.2's task fields (title, description, metadata, earliest_begin) are options, kept
        // in `options` with the others; `checksum` (ALGO:HEX) replaces `sha256`, which is
        // rewritten here so the column has one form (older resume data still reads `sha256`).
        migrator.registerMigration(
            "v6-checksum-option",
            migrate: Self.crashable { db in
                let rows = try Row.fetchAll(db, sql: "SELECT id, options FROM task WHERE options LIKE '%\"sha256\"%'")
                for row in rows {
                    let id: Int64 = row["id"]
                    let text: String = row["options"]
                    guard var object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                        let hex = object["sha256"] as? String
                    else {
                        continue  // left as it is: the daemon reports the row and keeps it aside
                    }
                    object["sha256"] = nil
                    object["checksum"] = "sha256:" + hex
                    let data = try JSONSerialization.data(
                        withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                    try db.execute(
                        sql: "UPDATE task SET options = ? WHERE id = ?",
                        arguments: [String(decoding: data, as: UTF8.self), id])
                }
            })
        // The pending completion a task's end makes due is written in the end's own transaction;
        // `announced` says whether `EventsFinished` went out for it (rows from before: yes).
        migrator.registerMigration(
            "v7-completion-announced",
            migrate: Self.crashable { db in
                try db.alter(table: "pendingCompletion") { t in
                    t.add(column: "announced", .boolean).notNull().defaults(to: true)
                }
            })
        // Ownership is (uid, app) since v1.3: the sandboxed app a task belongs to ('' for a host
        // caller), and whether it writes the caller's own file in place (StartAt with a file).
        migrator.registerMigration(
            "v8-apps",
            migrate: Self.crashable { db in
                try db.alter(table: "task") { t in
                    t.add(column: "app", .text).notNull().defaults(to: "")
                    t.add(column: "writesInPlace", .boolean).notNull().defaults(to: false)
                }
            })
        // Groups (v1.3): many files as one job. A task names its group (0: none); an atomic
        // group's `publishing` is the recorded decision to rename all its files into place.
        migrator.registerMigration(
            "v9-groups",
            migrate: Self.crashable { db in
                try db.alter(table: "task") { t in
                    t.add(column: "groupID", .integer).notNull().defaults(to: 0)
                }
                try db.create(table: "taskGroup") { t in
                    t.column("id", .integer).primaryKey()
                    t.column("ownerUID", .integer).notNull()
                    t.column("app", .text).notNull()
                    t.column("session", .text).notNull()
                    t.column("title", .text).notNull()
                    t.column("atomic", .boolean).notNull()
                    t.column("taskSignals", .boolean).notNull()
                    t.column("publishing", .boolean).notNull().defaults(to: false)
                    t.column("createdAt", .text).notNull()
                }
            })
        // A group's own limits: files at once (`parallel`) and the bandwidth its files share.
        migrator.registerMigration(
            "v10-group-limits",
            migrate: Self.crashable { db in
                try db.alter(table: "taskGroup") { t in
                    t.add(column: "parallel", .integer).notNull().defaults(to: 0)
                    t.add(column: "maxBytesPerSecond", .integer).notNull().defaults(to: 0)
                }
            })
        migrator.registerMigration(
            "v11-uploads",
            migrate: Self.crashable { db in
                try db.alter(table: "task") { t in
                    // An upload's file, form and reply (UploadSpec's JSON); NULL for a download.
                    t.add(column: "upload", .text)
                    // The reply's body kept for GetReply (at most 1 MiB).
                    t.add(column: "replyBody", .blob)
                }
            })
        migrator.registerMigration(
            "v12-handler-challenges",
            migrate: Self.crashable { db in
                try db.alter(table: "handler") { t in
                    // The kinds of question the handler's object answers, one per line; none before.
                    t.add(column: "challenges", .text).notNull().defaults(to: "")
                    t.add(column: "challengeTimeout", .integer).notNull().defaults(to: 120)
                }
            })
        migrator.registerMigration(
            "v13-metrics",
            migrate: Self.crashable { db in
                try db.alter(table: "task") { t in
                    // Where its time went (`TaskMetrics`' JSON, GetMetrics); NULL until it ran.
                    t.add(column: "metrics", .text)
                }
            })
        migrator.registerMigration(
            "v14-responses",
            migrate: Self.crashable { db in
                try db.alter(table: "task") { t in
                    // A download's last response status (304: not modified) and its Last-Modified.
                    t.add(column: "responseStatus", .integer)
                    t.add(column: "lastModified", .integer)
                }
            })
        return migrator
    }

    /// A migration's body, then the `migrating` crash point (inside its transaction): the crash
    /// tests kill the daemon inside the n-th migration a fresh state directory runs.
    private static func crashable(
        _ body: @escaping @Sendable (Database) throws -> Void
    ) -> @Sendable (Database) throws -> Void {
        { db in
            try body(db)
            CrashPoint.migrating.reached()
        }
    }
}
