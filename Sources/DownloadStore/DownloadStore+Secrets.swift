import DownloadModel
import GRDB

extension DownloadStore {
    /// Seals the headers and proxies rows written before `StoreSecrets` keep in clear (once:
    /// afterwards no row matches), and writes over the pages that held them (`secure_delete`
    /// for this transaction), so the clear text does not stay in the file's free space.
    func sealClearSecrets() throws {
        try database.writeWithoutTransaction { db in
            let rows = try Row.fetchAll(
                db, sql: #"SELECT id, options FROM task WHERE options LIKE '%"headers":%' OR options LIKE '%"proxy":%'"#
            )
            var sealed: [(Int64, String)] = []
            for row in rows {
                let id: Int64 = row["id"]
                let text: String = row["options"]
                // A row that does not decode is left as it is: loading it says why.
                guard id > 0, let options = try? TaskRow.decode(text, task: UInt64(id), secrets: secrets) else {
                    continue
                }
                let again = try TaskRow.encode(options, task: UInt64(id), secrets: secrets)
                if again != text { sealed.append((id, again)) }
            }
            guard !sealed.isEmpty else { return }
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.inTransaction {
                for (id, text) in sealed {
                    try db.execute(sql: "UPDATE task SET options = ? WHERE id = ?", arguments: [text, id])
                }
                return .commit
            }
            // The WAL holds the old pages until it is checkpointed into the file and truncated.
            _ = try db.checkpoint(.truncate)
        }
    }
}
