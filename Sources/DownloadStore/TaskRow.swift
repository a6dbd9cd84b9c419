import DownloadModel
import Foundation
import GRDB
import UserFiles
import FileIdentities

/// One row of `task`. `options` holds `DownloadOptions` in its documented JSON form (snake_case
/// keys of the D-Bus option names, see data/schema.md), never Swift's property names.
struct TaskRow: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "task"
    var id: Int64?
    var ownerUID: Int64
    var app: String
    var writesInPlace: Bool
    var groupID: Int64
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
    /// SQLite integers are signed: the bits of the UInt64 device and inode numbers.
    var partialDevice: Int64?
    var partialInode: Int64?
    var fileMode: Int64?
    /// An upload's `UploadSpec` as JSON (its reply's body in `replyBody`); nil for a download.
    var upload: String?
    var replyBody: Data?
    var createdAt: Date
    var updatedAt: Date
    var endedAt: Date?

    init(record: DownloadTaskRecord, secrets: StoreSecrets) throws {
        id = Int64(record.id)
        ownerUID = Int64(record.owner)
        app = record.app
        writesInPlace = record.writesInPlace
        groupID = Int64(record.group)
        session = record.session
        url = record.url
        destination = record.destination
        destinationIsDirectory = record.destinationIsDirectory
        options = ""
        state = record.state.rawValue
        durableOffset = 0
        expectedLength = -1
        // When the engine made it, as GetMetrics' `queued_at` says (else now).
        createdAt = record.queuedAt > 0 ? Date(timeIntervalSince1970: Double(record.queuedAt) / 1_000_000) : Date()
        updatedAt = Date()
        try update(from: record, secrets: secrets)
    }

    /// `options` as the column keeps them: their headers and proxy sealed (`StoreSecrets`).
    static func encode(_ options: DownloadOptions, task id: UInt64, secrets: StoreSecrets) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let (visible, sealed) = try secrets.seal(options, task: id)
        return String(decoding: try encoder.encode(StoredOptions(options: visible, sealed: sealed)), as: UTF8.self)
    }

    /// The column's options, their secrets opened.
    static func decode(_ text: String, task id: UInt64, secrets: StoreSecrets) throws -> DownloadOptions {
        let stored: StoredOptions
        do {
            stored = try JSONDecoder().decode(StoredOptions.self, from: Data(text.utf8))
        } catch {
            throw StoreError("options do not decode: \(error)")
        }
        var options = stored.options
        if let sealed = stored.sealed { try secrets.open(sealed, into: &options, task: id) }
        return options
    }

    /// An upload's columns: its JSON (the reply's body left out) and a new reply's body (nil:
    /// none new, the column keeps what it has; an empty reply is an empty blob); nil for a download.
    static func encode(_ spec: UploadSpec?) throws -> (String?, Data?) {
        guard let spec else { return (nil, nil) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (String(decoding: try encoder.encode(spec), as: UTF8.self), spec.newReplyBody.map { Data($0) })
    }

    /// A task's metrics as the `metrics` column keeps them (`TaskMetrics`' JSON).
    static func encode(_ metrics: TaskMetrics) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(metrics), as: UTF8.self)
    }

    /// Takes what the engine knows now; returns whether the task has just ended.
    @discardableResult
    mutating func update(from record: DownloadTaskRecord, secrets: StoreSecrets) throws -> Bool {
        options = try TaskRow.encode(record.options, task: record.id, secrets: secrets)
        finalURL = record.finalURL
        resolvedPath = record.resolvedPath
        let wasEnded = DownloadState(rawValue: state)?.isTerminal ?? false
        state = record.state.rawValue
        durableOffset = max(0, record.durableOffset)
        expectedLength = max(-1, record.expectedLength)
        validator = record.validator
        errorName = record.errorName
        errorMessage = record.errorMessage
        partialDevice = record.partialFile.map { Int64(bitPattern: $0.device) }
        partialInode = record.partialFile.map { Int64(bitPattern: $0.inode) }
        fileMode = record.fileMode.map { Int64($0) }
        (upload, replyBody) = try TaskRow.encode(record.upload)
        updatedAt = Date()
        if !record.state.isTerminal { endedAt = nil }
        guard record.state.isTerminal && (!wasEnded || endedAt == nil) else { return false }
        endedAt = updatedAt
        return true
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
