import DownloadModel
import Foundation
import UserFiles
#if canImport(Glibc)
import Glibc
#endif

/// Uploads as the manager holds them: made from a request with its file's identity, their file
/// opened as the owner (or by the descriptor the caller handed over), a copy kept when asked
/// (`snapshot`). They are scheduled, paused, resumed, cancelled and stored as downloads are;
/// the scheduler runs an `UploadRun` for them.
extension SessionManager {
    /// What a `snapshot` copy leaves free in the state directory, in bytes.
    static let snapshotMargin: Int64 = 256 << 20

    /// A new upload (`request.upload` set). `descriptor`: the file the caller handed over
    /// (`UploadAt`), duplicated and held while this daemon runs.
    @discardableResult
    public func createUpload(_ request: DownloadRequest, descriptor: Int32? = nil) throws -> TaskSnapshot {
        guard request.upload != nil else { throw DownloadError.invalidArgument("an upload needs a file to send") }
        try request.options.validate()
        let held = try descriptor.map { try SourceFile.duplicating($0) }
        return insert(source: held) { id in DownloadTaskRecord(id: id, request: request) }
    }

    /// The identity of the regular file `path` as `owner` reaches it (their file helper on the
    /// system bus): `FileError` when they cannot read it or it is no regular file. Blocks.
    /// `/.flatpak-info` of process `pid` of user `owner`, opened with that user's rights (their
    /// file helper on the system bus): a root daemon needs no `CAP_SYS_PTRACE` to read another
    /// uid's `/proc/PID/root`. nil: there is none (a host process). Blocks.
    public func openAppInfo(pid: UInt32, owner: UInt32) throws -> Int32? {
        try files.files(for: owner).openAppInfo(pid: pid)
    }

    public func inspectSource(_ path: String, owner: UInt32) throws -> SourceIdentity {
        let fd = try files.files(for: owner).openForReading(path)
        defer { close(fd) }
        guard let identity = SourceIdentity.of(descriptor: fd) else {
            throw DownloadError.file("\(path) is not a regular file")
        }
        return identity
    }

    /// The identity of a descriptor a caller handed over: a regular file open for reading.
    public static func inspectSource(descriptor fd: Int32) throws -> SourceIdentity {
        let file = try SourceFile.duplicating(fd)
        guard let identity = file.identity else {
            throw DownloadError.file("the source descriptor is not a regular file")
        }
        return identity
    }

    /// Copies the file to send (`path` as `owner` reaches it, or the caller's `descriptor`) into
    /// `directory` (the service's own, mode 0600, synced), for the option `snapshot`: exactly the
    /// `recorded` file, as it was at the call, and no byte more. The copy's room is taken first
    /// (`fallocate`), so a full disk shows before a byte is written; a file that is not the one
    /// recorded, or that grows, shrinks or changes while it is copied, is `SourceChanged` (a user
    /// who extends a sparse file as it is read cannot make root's copy larger than what was
    /// counted). Returns the copy's path and identity. Blocks; a failure leaves no copy behind.
    public func snapshot(
        of path: String, descriptor: Int32?, owner: UInt32, recorded: SourceIdentity, into directory: String
    ) throws -> (String, SourceIdentity) {
        let source: SourceFile
        if let descriptor {
            source = try SourceFile.duplicating(descriptor)
        } else {
            source = SourceFile(owning: try files.files(for: owner).openForReading(path))
        }
        func changed() -> String? {
            source.identity.map { $0.change(from: recorded) } ?? "it is no longer a regular file"
        }
        if let why = changed() { throw DownloadError.sourceChanged(path, why) }
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw DownloadError.file("cannot make \(directory) for the upload's copy: \(errnoText())")
        }
        // The copy must leave the state directory room for what every task records: a copy that
        // would bring it within `snapshotMargin` of full is refused before a byte is written.
        let size = recorded.size
        var volume = statvfs()
        if statvfs(directory, &volume) == 0 {
            let free = Int64(volume.f_bavail) * Int64(volume.f_frsize)
            guard free - size >= Self.snapshotMargin else {
                throw DownloadError.file(
                    "the service has no room for a copy of \(path) (\(size) bytes; \(max(0, free)) free in \(directory), "
                        + "of which \(Self.snapshotMargin) stay free): upload it without snapshot"
                )
            }
        }
        let copy = FilePaths.join(directory, "\(UUID().uuidString.lowercased()).upload")
        let fd = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw DownloadError.file("cannot make the upload's copy in \(directory): \(errnoText())") }
        var done = false
        defer {
            close(fd)
            if !done { unlink(copy) }
        }
        if size > 0 {
            let result = posix_fallocate(fd, 0, off_t(size))
            // A file system without fallocate (EOPNOTSUPP, EINVAL) is written as it comes.
            if result == ENOSPC || result == EDQUOT {
                throw DownloadError.file(
                    "the service has no room for a copy of \(path) (\(size) bytes): \(errnoText(result))")
            }
        }
        var offset: Int64 = 0
        while offset < size {
            let chunk = try source.read(Int(min(Int64(1 << 20), size - offset)), at: offset)
            if chunk.readableBytes == 0 {
                throw DownloadError.sourceChanged(path, "it ends at byte \(offset) of \(size) while it is copied")
            }
            try chunk.withUnsafeReadableBytes { raw in
                try writeFully(fd, raw, at: offset, failure: "cannot copy \(path) for the upload")
            }
            offset += Int64(chunk.readableBytes)
            // A file changed (grown, cut, rewritten) while it is copied stops the copy within a
            // chunk, not after the whole recorded size.
            if offset < size, let why = changed() {
                throw DownloadError.sourceChanged(path, why + " while it was copied")
            }
        }
        // Exactly what was recorded: the same file, still that size and unmodified.
        if let why = changed() { throw DownloadError.sourceChanged(path, why + " while it was copied") }
        guard fsync(fd) == 0, let identity = SourceIdentity.of(descriptor: fd), identity.size == size else {
            throw DownloadError.file("cannot sync the upload's copy of \(path): \(errnoText())")
        }
        done = true
        return (copy, identity)
    }

    /// Removes what an upload made that outlives it: its reply's partial file and the service's
    /// copy of its file. On the task's I/O queue.
    func removeUploadFiles(of task: DownloadTask, _ spec: UploadSpec) async {
        let record = task.record
        let access = fileAccess(for: task)
        do {
            try await task.onIOQueue {
                if spec.replyDestination != nil { try access.remove(record.partialPath) }
                if let snapshot = spec.snapshot { unlink(snapshot) }
            }
        } catch {
            logger.warning("task \(task.id): \(error)")
        }
        if record.state == .cancelled { task.update { $0.source = nil } }
    }
}
