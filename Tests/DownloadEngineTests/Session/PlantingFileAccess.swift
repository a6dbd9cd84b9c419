import DownloadEngine
import DownloadModel
import Foundation
import NIOConcurrencyHelpers
import UserFiles
import FileIdentities

/// The real file access, with another user's move at the worst moment: the first rename to
/// `plantAt` finds a file planted there just before it (after every check of the name passed).
final class PlantingFileAccess: FileAccess, FileAccessProvider {
    private let direct = DirectFileAccess()
    private let plantAt: String
    private let planted = NIOLockedValueBox(false)
    static let plantedBytes = Array("planted by someone else\n".utf8)

    init(plantAt: String) { self.plantAt = plantAt }

    func files(for owner: UInt32) -> any FileAccess { self }
    func files(for owner: UInt32, below anchor: DescriptorAnchor) -> any FileAccess { self }

    func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes?
    ) throws -> AttributeWrite {
        if destination == plantAt,
            !planted.withLockedValue({ done in
                defer { done = true }; return done
            })
        {
            FileManager.default.createFile(atPath: destination, contents: Data(Self.plantedBytes))
        }
        return try direct.publish(
            partial, identity: identity, to: destination, replace: replace, mode: mode, origin: origin)
    }

    func openPartial(_ path: String, reuse: PartialReuse) throws -> OpenedPartial {
        try direct.openPartial(path, reuse: reuse)
    }
    func remove(_ path: String) throws { try direct.remove(path) }
    func isDirectory(_ path: String) throws -> Bool { try direct.isDirectory(path) }
    func isWritableDirectory(_ path: String) throws -> Bool { try direct.isWritableDirectory(path) }
    func exists(_ path: String) throws -> Bool { try direct.exists(path) }
    func isFile(_ path: String, identity: FileIdentity) throws -> Bool { try direct.isFile(path, identity: identity) }
    func openForReading(_ path: String) throws -> Int32 { try direct.openForReading(path) }
    func makeDirectories(_ relative: String, below base: String, mode: UInt32?) throws {
        try direct.makeDirectories(relative, below: base, mode: mode)
    }
    func openAppInfo(pid: UInt32) throws -> Int32? { try direct.openAppInfo(pid: pid) }
}
