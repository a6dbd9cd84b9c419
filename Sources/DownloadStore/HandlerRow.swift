import GRDB

struct HandlerRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "handler"
    var ownerUID: Int64
    var session: String
    var connection: String
    var objectPath: String
    var busName: String?
    var busID: String?

    init(_ handler: CompletionHandler) {
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
            busID: busID
        )
    }
}
