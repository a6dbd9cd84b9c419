import DownloadModel
import UserFiles
import FileIdentities

/// A task's file access when the task's record sets limits the owner's access alone does not:
/// a sandboxed app's task whose descriptor is gone (a restart) only reuses the partial file it
/// recorded and never creates one; a file written in place (the caller's own, `StartAt` with a
/// file) is never removed.
struct TaskFileAccess: FileAccess {
    let base: any FileAccess
    /// Only the recorded partial file is opened; nothing is created.
    let recordedOnly: Bool
    /// A path never removed (the caller's own file, written in place).
    let kept: String?

    func openPartial(_ path: String, reuse: PartialReuse) throws -> OpenedPartial {
        guard recordedOnly else { return try base.openPartial(path, reuse: reuse) }
        switch reuse {
        case .ifSame(let identity), .onlyIfSame(let identity):
            return try base.openPartial(path, reuse: .onlyIfSame(identity))
        case .never, .ifOwned:
            throw DownloadError.file(
                "the directory this task was given is no longer open (the service restarted before the download began); "
                    + "resume it with ResumeWithData and a new destination_fd"
            )
        }
    }

    func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes?
    ) throws -> AttributeWrite {
        try base.publish(partial, identity: identity, to: destination, replace: replace, mode: mode, origin: origin)
    }

    func remove(_ path: String) throws {
        guard path != kept else { return }
        try base.remove(path)
    }

    func isDirectory(_ path: String) throws -> Bool { try base.isDirectory(path) }
    func isWritableDirectory(_ path: String) throws -> Bool { try base.isWritableDirectory(path) }
    func exists(_ path: String) throws -> Bool { try base.exists(path) }
    func isFile(_ path: String, identity: FileIdentity) throws -> Bool { try base.isFile(path, identity: identity) }
    func openForReading(_ path: String) throws -> Int32 { try base.openForReading(path) }
    func openAppInfo(pid: UInt32) throws -> Int32? { try base.openAppInfo(pid: pid) }
    func makeDirectories(_ relative: String, below base: String, mode: UInt32?) throws {
        try self.base.makeDirectories(relative, below: base, mode: mode)
    }
}
