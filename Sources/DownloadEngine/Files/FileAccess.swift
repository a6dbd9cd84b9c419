import DownloadModel
import UserFiles
import FileIdentities

/// Every file the engine opens, renames or removes goes through this, done with the task
/// owner's credentials (`FileAccessProvider` hands out one per owner). The engine itself only
/// writes, truncates, syncs and reads through the descriptors it gets back.
public protocol FileAccess: Sendable {
    /// Opens the partial file (keeping the one there only as `reuse` allows; see
    /// `UserFileOperations.openPartial`).
    func openPartial(_ path: String, reuse: PartialReuse) throws -> OpenedPartial
    /// Renames the partial file to `destination` atomically (never replacing a file unless
    /// `replace`: then `FileExists`), after checking it is still `identity`; sets `mode` and
    /// `origin` (what became of those is returned: a file system without user attributes is no
    /// error) and syncs the directory.
    @discardableResult
    func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes?
    ) throws -> AttributeWrite
    /// Removes a file, or a directory only when it is empty (one that holds anything stays); a
    /// missing one is not an error.
    func remove(_ path: String) throws
    /// Whether the owner reaches a directory at `path` (one they cannot reach reads as missing).
    func isDirectory(_ path: String) throws -> Bool
    /// Whether the owner may create files in the directory `path`.
    func isWritableDirectory(_ path: String) throws -> Bool
    /// Whether the owner sees anything at `path`.
    func exists(_ path: String) throws -> Bool
    /// Whether `path` is the owner's regular file `identity` (a link is not followed).
    func isFile(_ path: String, identity: FileIdentity) throws -> Bool
    /// A regular file the owner can read, opened read-only; the caller closes the descriptor.
    func openForReading(_ path: String) throws -> Int32
    /// Makes the missing directories of `relative` below `base`, never through a link
    /// (`UserFileOperations.makeDirectories`).
    func makeDirectories(_ relative: String, below base: String, mode: UInt32?) throws
    /// `/.flatpak-info` of the owner's process `pid`, opened as the owner (nil: none, a host
    /// process); the caller closes the descriptor and checks what it is.
    func openAppInfo(pid: UInt32) throws -> Int32?
}

extension FileAccess {
    /// A publish with no origin attributes (a file put back, an upload's reply).
    func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?
    ) throws {
        try publish(partial, identity: identity, to: destination, replace: replace, mode: mode, origin: nil)
    }
}

extension FileOperationError {
    /// The engine's error for it (`FileExists` or `FileError`, with the message as it is).
    func downloadError(path: String) -> DownloadError {
        kind == .exists ? .fileExists(path) : .file(message)
    }
}
