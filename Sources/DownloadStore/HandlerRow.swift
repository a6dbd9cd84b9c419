import GRDB

struct HandlerRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "handler"
    var ownerUID: Int64
    var session: String
    var connection: String
    var objectPath: String
    var busName: String?
    var busID: String?
    /// The kinds of question it answers, sorted, one per line ("" for none).
    var challenges: String
    var challengeTimeout: Int64

    init(_ handler: CompletionHandler) {
        challenges = handler.challenges.sorted().joined(separator: "\n")
        challengeTimeout = Int64(handler.challengeTimeout)
        ownerUID = Int64(handler.owner)
        session = handler.session
        connection = handler.connection
        objectPath = handler.objectPath
        busName = handler.busName
        busID = handler.busID
    }

    var handler: CompletionHandler {
        CompletionHandler(
            owner: UInt32(ownerUID), session: session, connection: connection, objectPath: objectPath, busName: busName,
            busID: busID, challenges: Set(challenges.split(separator: "\n").map(String.init)),
            challengeTimeout: UInt32(clamping: challengeTimeout)
        )
    }
}
