import Crypto
import Foundation

/// A group's resume data (`Group.Pause`, `ResumeGroupWithData`): a blob a person can read, as a
/// task's is (a header line, a JSON line, an HMAC-SHA256 line over the first two), holding the
/// group's own fields and the resume data of each of its files not yet in place, each a task's
/// blob exactly as `Pause` gives it (so each is authenticated, and its headers sealed, on its own
/// too). Files already in place (a non-atomic group's finished ones) are counted, not carried.
public struct GroupResumeData: Sendable {
    public static let header = "org.example.Downloads.GroupResumeData/1"
    /// 10,000 files of a few KiB each; a file's own blob may be up to `ResumeData.maximumSize`
    /// (a Metalink's piece hashes), which a group of many such files cannot carry.
    public static let maximumSize = 64 << 20

    /// The group as it was (its id finds it again while it exists).
    public var group: DownloadGroupRecord
    /// Each file's own resume data, in the group's order.
    public var files: [ResumeData]
    /// How many of the group's files were already in place.
    public var finished: Int

    public init(group: DownloadGroupRecord, files: [ResumeData], finished: Int) {
        self.group = group
        self.files = files
        self.finished = finished
    }

    private struct Body: Codable {
        var group_id: UInt64
        var owner_uid: UInt32
        var app: String?
        var session: String
        var title: String
        var atomic: Bool
        var task_signals: Bool
        var parallel: Int?
        var max_bytes_per_second: UInt64?
        var finished: Int
        /// Each file's blob as its text (three lines).
        var files: [String]
    }

    /// The blob: header line, JSON line, `hmac-sha256:<hex>` line.
    public func encoded(key: SymmetricKey) throws -> [UInt8] {
        let blobs = try files.map { String(decoding: try $0.encoded(key: key), as: UTF8.self) }
        let body = Body(
            group_id: group.id, owner_uid: group.owner, app: group.app.isEmpty ? nil : group.app,
            session: group.session,
            title: group.title, atomic: group.atomic, task_signals: group.taskSignals,
            parallel: group.parallel == 0 ? nil : group.parallel,
            max_bytes_per_second: group.maxBytesPerSecond == 0 ? nil : group.maxBytesPerSecond, finished: finished,
            files: blobs
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let blob = SignedBlob.encode(header: Self.header, json: Array(try encoder.encode(body)), key: key)
        guard blob.count <= Self.maximumSize else {
            throw DownloadError.invalidArgument(
                "the group's resume data would be \(blob.count) bytes; at most \(Self.maximumSize)")
        }
        return blob
    }

    /// Verifies and decodes a blob made for `owner` (and a sandboxed `app`); every failure is
    /// `InvalidResumeData` with a reason, a file's naming the file.
    public static func decode(
        _ blob: [UInt8], key: SymmetricKey, owner: UInt32, app: String = ""
    ) throws -> GroupResumeData {
        let json = try SignedBlob.decode(blob, key: key, maximumSize: maximumSize, what: "the group's resume data") {
            first in
            guard first == Array(header.utf8) else {
                if first.starts(with: Array("org.example.Downloads.ResumeData/".utf8)) {
                    throw DownloadError.invalidResumeData("this is a task's resume data: give it to ResumeWithData")
                }
                throw DownloadError.invalidResumeData("unknown group resume data version (expected \(header))")
            }
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(json))
        } catch {
            throw DownloadError.invalidResumeData("the group's resume data does not decode: \(error)")
        }
        guard body.owner_uid == owner else {
            throw DownloadError.invalidResumeData("the resume data belongs to another user")
        }
        guard app.isEmpty || (body.app ?? "") == app else {
            throw DownloadError.invalidResumeData("the resume data belongs to another app")
        }
        guard body.finished >= 0, !body.files.isEmpty || body.finished > 0 else {
            throw DownloadError.invalidResumeData("the group's resume data names no file")
        }
        var files: [ResumeData] = []
        for (index, text) in body.files.enumerated() {
            do {
                let file = try ResumeData.decode(Array(text.utf8), key: key, owner: owner, app: body.app ?? "")
                guard file.app == (body.app ?? ""), file.session == body.session else {
                    throw DownloadError.invalidResumeData("it is not of this group's app and session")
                }
                files.append(file)
            } catch let error as DownloadError {
                throw DownloadError.invalidResumeData("file \(index): \(error.message)")
            }
        }
        var group = DownloadGroupRecord(
            id: body.group_id, owner: body.owner_uid, app: body.app ?? "", session: body.session, title: body.title,
            atomic: body.atomic, taskSignals: body.task_signals
        )
        group.parallel = max(0, body.parallel ?? 0)
        group.maxBytesPerSecond = body.max_bytes_per_second ?? 0
        return GroupResumeData(group: group, files: files, finished: body.finished)
    }
}
