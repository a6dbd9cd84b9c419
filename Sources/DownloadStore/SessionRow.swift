import GRDB

struct SessionRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "session"
    var ownerUID: Int64
    var name: String
    var endedSinceCall: Int64
}
