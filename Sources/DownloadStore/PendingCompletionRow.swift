import Foundation
import GRDB

struct PendingCompletionRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "pendingCompletion"
    var ownerUID: Int64
    var session: String
    var createdAt: Date
    /// `EventsFinished` went out for it (the service announces a new one once).
    var announced: Bool
}
