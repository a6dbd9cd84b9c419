import GRDB

extension DownloadStore {
    /// Shipped migrations are never edited: add a new one instead. Documented in data/schema.md.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
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
                    .check { ["queued", "running", "paused", "retrying", "finished", "failed", "cancelled"].contains($0) }
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
        }
        return migrator
    }
}
