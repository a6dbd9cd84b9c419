import DownloadEngine
import Foundation
import GRDB

struct TaskRow: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "task"
    var id: Int64?
    var ownerUID: Int64
    var session: String
    var url: String
    var finalURL: String?
    var destination: String
    var destinationIsDirectory: Bool
    var resolvedPath: String?
    var state: String
    var durableOffset: Int64
    var expectedLength: Int64
    var validator: String?
    var options: String
    var errorName: String?
    var errorMessage: String?
    var createdAt: Date
    var updatedAt: Date
    var endedAt: Date?

    init(record: DownloadTaskRecord, owner: UInt32) throws {
        id = Int64(record.id)
        ownerUID = Int64(owner)
        session = record.session
        url = record.url
        destination = record.destination
        destinationIsDirectory = record.destinationIsDirectory
        options = String(decoding: try JSONEncoder().encode(record.options), as: UTF8.self)
        state = record.state.rawValue
        durableOffset = 0
        expectedLength = -1
        createdAt = Date()
        updatedAt = createdAt
        update(from: record)
    }

    mutating func update(from record: DownloadTaskRecord) {
        finalURL = record.finalURL
        resolvedPath = record.resolvedPath
        let wasEnded = DownloadState(rawValue: state)?.isTerminal ?? false
        state = record.state.rawValue
        durableOffset = max(0, record.durableOffset)
        expectedLength = max(-1, record.expectedLength)
        validator = record.validator
        errorName = record.errorName
        errorMessage = record.errorMessage
        updatedAt = Date()
        if record.state.isTerminal && !wasEnded { endedAt = updatedAt }
        if !record.state.isTerminal { endedAt = nil }
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }

    func record() throws -> DownloadTaskRecord {
        let decoded = try JSONDecoder().decode(DownloadOptions.self, from: Data(options.utf8))
        var record = DownloadTaskRecord(
            id: UInt64(id ?? 0), session: session, url: url, destination: destination,
            destinationIsDirectory: destinationIsDirectory, options: decoded,
            state: DownloadState(rawValue: state) ?? .failed, durableOffset: durableOffset,
            expectedLength: expectedLength, validator: validator, finalURL: finalURL, resolvedPath: resolvedPath
        )
        record.errorName = errorName
        record.errorMessage = errorMessage
        return record
    }
}
