import FileIdentities
import Foundation

/// The shared files as kept in the state directory (`shared.json`, the daemon's own), so that a
/// restart offers again what was offered, until its time, with its downloads counted: written
/// whole (a new file synced, then renamed over the old) after each file shared or withdrawn and
/// each minute; read at start, where each file is checked again before it is offered.
public enum SharedFileList {
    struct Entry: Codable {
        var sha256: String
        var name: String
        var path: String
        var owner: UInt32
        var app: String
        var task: UInt64
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
        var expires: Int64
        var shareLimit: UInt32
        var bytesServed: Int64
    }

    /// What `path` holds; nothing for a missing or unreadable file (a log line is the caller's).
    public static func load(from path: String) throws -> [SharedFile] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        let entries = try JSONDecoder().decode([Entry].self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        return entries.compactMap { entry in
            guard PassimRequest.isSHA256(entry.sha256) else { return nil }
            var file = SharedFile(
                sha256: entry.sha256.lowercased(), name: entry.name, path: entry.path, owner: entry.owner,
                app: entry.app,
                task: entry.task, identity: FileIdentity(device: entry.device, inode: entry.inode), size: entry.size,
                modified: entry.modified, expires: entry.expires, shareLimit: entry.shareLimit)
            file.bytesServed = entry.bytesServed
            return file
        }
    }

    public static func save(_ files: [SharedFile], to path: String) throws {
        let entries = files.map {
            Entry(
                sha256: $0.sha256, name: $0.name, path: $0.path, owner: $0.owner, app: $0.app, task: $0.task,
                device: $0.identity.device, inode: $0.identity.inode, size: $0.size, modified: $0.modified,
                expires: $0.expires, shareLimit: $0.shareLimit, bytesServed: $0.bytesServed)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(entries)
        try StateFile.save(data, to: path)
    }
}
