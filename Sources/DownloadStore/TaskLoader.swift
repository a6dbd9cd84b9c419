import DownloadModel
import FileIdentities
import Foundation
import GRDB

/// Reads the `task` table's rows into records at a start, a hundred thousand at a time: each
/// row's columns by their place in `columns` (not by name, which GRDB compares lowercased), the
/// options' JSON decoded once for every text it has (a group's files mostly share the group's) and
/// the result shared between the records that have it (`DownloadRequest.options` is `Shared`).
/// Options with sealed secrets are bound to their task (`StoreSecrets`): decoded for each.
struct TaskLoader {
    /// The columns read, in this order (every column but the replies' bodies and the times).
    static let columns = """
        id, ownerUID, app, writesInPlace, groupID, session, url, finalURL, destination, destinationIsDirectory, resolvedPath,
        state, durableOffset, expectedLength, validator, options, errorName, errorMessage, partialDevice, partialInode,
        fileMode, upload, metrics, responseStatus, lastModified
        """

    let secrets: StoreSecrets
    private var decoded: [String: Shared<DownloadOptions>] = [:]
    /// The last session and app read: consecutive rows mostly have the same, and share the text.
    private var lastSession = ""
    private var lastApp = ""

    init(secrets: StoreSecrets) {
        self.secrets = secrets
    }

    /// The record of `row` (selected with `columns`); throws (with the reason) when the row
    /// cannot be one.
    mutating func record(_ row: Row) throws -> DownloadTaskRecord {
        let rowID: Int64 = row[0] ?? 0
        guard rowID > 0 else { throw StoreError("row without an id") }
        let id = UInt64(rowID)
        let ownerUID: Int64 = row[1]
        guard let owner = UInt32(exactly: ownerUID) else { throw StoreError("owner uid \(ownerUID) is out of range") }
        let stateText: String = row[11]
        guard let state = DownloadState(rawValue: stateText) else { throw StoreError("unknown state '\(stateText)'") }
        let destination: String = row[8]
        let resolved: String? = row[10]
        var record = DownloadTaskRecord(
            id: id, owner: owner, session: TaskLoader.shared(row[5], &lastSession), url: row[6],
            destination: destination,
            destinationIsDirectory: row[9], options: DownloadOptions(),
            state: state, durableOffset: row[12], expectedLength: row[13], validator: row[14], finalURL: row[7],
            // The same text as the destination's, most often: one copy of it.
            resolvedPath: resolved == destination ? destination : resolved
        )
        record.request.$options = try options(row[15], task: id)
        record.errorName = row[16]
        record.errorMessage = row[17]
        record.app = TaskLoader.shared(row[2], &lastApp)
        record.writesInPlace = row[3]
        let group: Int64 = row[4]
        record.group = UInt64(max(0, group))
        let device: Int64? = row[18]
        let inode: Int64? = row[19]
        if let device, let inode {
            record.partialFile = FileIdentity(device: UInt64(bitPattern: device), inode: UInt64(bitPattern: inode))
        }
        let upload: String? = row[21]
        if let upload {
            do {
                // The reply's body stays in the store (`DownloadStore.replyBody`).
                record.upload = try JSONDecoder().decode(UploadSpec.self, from: Data(upload.utf8))
            } catch {
                throw StoreError("the upload does not decode: \(error)")
            }
        }
        let metrics: String? = row[22]
        if let metrics {
            // A row whose metrics no longer decode keeps its task: they are a report, not its state.
            record.metrics = try? JSONDecoder().decode(TaskMetrics.self, from: Data(metrics.utf8))
        }
        let status: Int64? = row[23]
        record.responseStatus = status.map { Int(clamping: $0) }
        record.lastModified = row[24]
        let fileMode: Int64? = row[20]
        if let fileMode {
            guard let mode = UInt32(exactly: fileMode), mode <= 0o777 else {
                throw StoreError("file mode \(fileMode) is out of range")
            }
            record.fileMode = mode
        }
        return record
    }

    /// `text` decoded, or the options decoded before from the same text.
    private mutating func options(_ text: String, task id: UInt64) throws -> Shared<DownloadOptions> {
        if let known = decoded[text] { return known }
        let options = Shared(wrappedValue: try TaskRow.decode(text, task: id, secrets: secrets))
        // Sealed secrets are this task's alone (and their text is too): not kept for another.
        if !text.contains(StoredOptions.sealedKey) { decoded[text] = options }
        return options
    }

    /// `text`, or `last` when they are equal (one copy for consecutive rows); `last` becomes it.
    private static func shared(_ text: String, _ last: inout String) -> String {
        if text != last { last = text }
        return last
    }
}
