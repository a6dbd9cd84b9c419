import CUserFiles
#if canImport(Glibc)
import Glibc
import FileIdentities
#endif

/// The file operations the service does for a user, done with the credentials of the process
/// that runs them: in the daemon for its own user, in that user's file helper otherwise.
///
/// The directory a path names is resolved as given (the user chose it, links and all); the
/// files the service makes in it are never reached through a link: each is opened by name below
/// the directory's descriptor with `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)`, created with
/// `O_EXCL`, and checked with `fstat` (a regular file of this user, one link, the recorded inode)
/// before it is kept or published.
///
/// With an `anchor` (a descriptor a caller handed over, `StartAt`) every operation is done below
/// that descriptor and nowhere else: a path outside it is refused, never opened.
public struct UserFileOperations: Sendable {
    public let anchor: DescriptorAnchor?

    public init(anchor: DescriptorAnchor? = nil) {
        self.anchor = anchor
    }

    // MARK: Files the user names

    /// Opens `path` read-only, as this process's user sees it (links followed: the user named
    /// it), refusing anything but a regular file (a FIFO or a device would block or never end).
    public func openForReading(_ path: String) throws -> OpenedPartial {
        guard anchor == nil else { throw outside(path) }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { throw FileOperationError.system("cannot open \(path)") }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw FileOperationError(.other, "\(path) is not a regular file")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return OpenedPartial(descriptor: fd, identity: Self.identity(info), created: false)
    }

    /// `/.flatpak-info` in the root of process `pid`, opened as this process's user may (a
    /// process of the same user: the kernel's check for `/proc/PID/root` needs no capability
    /// then), without following a link and non-blocking (a FIFO would hang a read); nil when
    /// there is none (a host process). Whoever reads it checks what it is (`AppIdentity`).
    public func openAppInfo(pid: UInt32) throws -> Int32? {
        let root = open("/proc/\(pid)/root", uf_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { throw FileOperationError.system("the root of process \(pid) cannot be opened") }
        defer { close(root) }
        let fd = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw FileOperationError.system("/.flatpak-info of process \(pid) cannot be opened")
        }
        return fd
    }

    // MARK: Partial files

    /// Opens the partial file at `path` for reading and writing. A file there is kept only when
    /// `reuse` allows and it passes the checks; anything else there (another user's file, a
    /// link, a second name of some other file, a FIFO) is unlinked and a fresh file created with
    /// `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600.
    public func openPartial(_ path: String, reuse: PartialReuse) throws -> OpenedPartial {
        if let anchor, anchor.kind == .file, path == anchor.path { return try openInPlace(anchor, reuse: reuse) }
        let (directory, name) = try openDirectory(of: path)
        defer { close(directory) }
        if reuse != .never {
            let fd = uf_open_beneath(directory, name, O_RDWR | O_NONBLOCK, 0)
            if fd >= 0 {
                if let identity = acceptable(fd, reuse: reuse) {
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
                    return OpenedPartial(descriptor: fd, identity: identity, created: false)
                }
                close(fd)
            }
            if case .onlyIfSame = reuse {
                throw FileOperationError(.other, code: ENOENT, "the partial file \(path) is gone or was replaced")
            }
            if fd < 0 && errno == ENOENT {
                return try create(name, in: directory, path: path)
            }
        } else {
            // Nothing there: the usual case of a new download, one call less than unlinking first.
            // Only a file in the way is removed and the create tried again; any other failure (a
            // directory the user cannot write) is the answer.
            do {
                return try create(name, in: directory, path: path)
            } catch let error as FileOperationError where error.kind == .exists {
                // Removed below.
            }
        }
        if unlinkat(directory, name, 0) != 0 && errno != ENOENT {
            throw FileOperationError.system(
                "a file that this download did not create is in the way at \(path) and cannot be removed")
        }
        return try create(name, in: directory, path: path)
    }

    private func create(_ name: String, in directory: Int32, path: String) throws -> OpenedPartial {
        let fd = uf_open_beneath(directory, name, O_RDWR | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw FileOperationError.system("cannot create \(path)") }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw FileOperationError.system("cannot inspect \(path)", code)
        }
        return OpenedPartial(descriptor: fd, identity: Self.identity(info), created: true)
    }

    /// The file's identity if it may be kept: regular, this user's, one link, and the recorded
    /// file when one was recorded.
    private func acceptable(_ fd: Int32, reuse: PartialReuse) -> FileIdentity? {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(), info.st_nlink == 1
        else {
            return nil
        }
        let identity = Self.identity(info)
        switch reuse {
        case .ifSame(let recorded), .onlyIfSame(let recorded):
            if recorded != identity { return nil }
        case .never, .ifOwned:
            break
        }
        return identity
    }

    /// The caller's own file, written in place: reopened read-write through the descriptor (a
    /// checksum reads it back), else the descriptor itself; a new task starts it empty.
    private func openInPlace(_ anchor: DescriptorAnchor, reuse: PartialReuse) throws -> OpenedPartial {
        var fd = open("/proc/self/fd/\(anchor.descriptor)", O_RDWR | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)
        if fd < 0 { fd = fcntl(anchor.descriptor, F_DUPFD_CLOEXEC, 3) }
        guard fd >= 0 else { throw FileOperationError.system("cannot write \(anchor.path)") }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw FileOperationError(.other, "\(anchor.path) is not a regular file")
        }
        let identity = Self.identity(info)
        switch reuse {
        case .ifSame(let recorded), .onlyIfSame(let recorded):
            guard recorded == identity else {
                close(fd)
                throw FileOperationError(.other, "\(anchor.path) is not the file this download was writing")
            }
            return OpenedPartial(descriptor: fd, identity: identity, created: false)
        case .ifOwned:
            return OpenedPartial(descriptor: fd, identity: identity, created: false)
        case .never:
            guard ftruncate(fd, 0) == 0 else {
                let code = errno
                close(fd)
                throw FileOperationError.system("cannot empty \(anchor.path)", code)
            }
            return OpenedPartial(descriptor: fd, identity: identity, created: true)
        }
    }

    static func identity(_ info: stat) -> FileIdentity {
        FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    // MARK: Publishing

    /// Moves the partial file to `destination` in one rename (`RENAME_NOREPLACE` unless
    /// `replace`), after checking that it is still `identity` and setting its `mode`. Syncs the
    /// destination's directory.
    /// `origin`: the attributes written on the file before it is renamed (`OriginAttributes`);
    /// a file written in place gets them where it is. Returns what became of them.
    @discardableResult
    public func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes? = nil
    ) throws -> AttributeWrite {
        // The caller's own file was written where it is: nothing to move, its mode is the caller's.
        if let anchor, anchor.kind == .file, partial == anchor.path, destination == anchor.path {
            return origin?.write(to: anchor.descriptor) ?? .notAsked
        }
        // Written in place and found again by path after a restart: it is where it belongs.
        if partial == destination {
            guard let identity, isFile(partial, identity: identity) else {
                throw FileOperationError(.other, "\(partial) was replaced by another file while downloading")
            }
            guard let origin else { return .notAsked }
            let (directory, name) = try openDirectory(of: partial)
            defer { close(directory) }
            let fd = uf_open_beneath(directory, name, O_RDONLY | O_NONBLOCK, 0)
            guard fd >= 0 else { return .refused(errno, attribute: OriginAttributes.originName) }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, Self.identity(info) == identity else {
                return .refused(ESTALE, attribute: OriginAttributes.originName)
            }
            return origin.write(to: fd)
        }
        let (sourcePath, sourceName) = try split(partial)
        let (targetPath, targetName) = try split(destination)
        let source = try openDirectory(sourcePath)
        defer { close(source) }
        // The partial file is usually beside its destination: one directory opened, not two.
        let target = targetPath == sourcePath ? source : try openDirectory(targetPath)
        defer { if target != source { close(target) } }
        let fd = uf_open_beneath(source, sourceName, O_RDONLY | O_NONBLOCK, 0)
        guard fd >= 0 else { throw FileOperationError.system("cannot open \(partial) to publish it") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(), info.st_nlink == 1,
            identity == nil || identity == Self.identity(info)
        else {
            throw FileOperationError(
                .other, "\(partial) was replaced by another file while downloading; it is not published")
        }
        if let mode, fchmod(fd, mode_t(mode & 0o777)) != 0 {
            throw FileOperationError.system("cannot set the mode of \(partial)")
        }
        // Before the rename: the file is never in place without them.
        let attributes = origin?.write(to: fd) ?? .notAsked
        if uf_renameat2(source, sourceName, target, targetName, replace ? 0 : 1) != 0 {
            let code = errno
            guard code == EINVAL || code == ENOSYS, !replace else {
                throw FileOperationError.system("cannot move \(partial) to \(destination)", code)
            }
            // A file system without RENAME_NOREPLACE: link() fails with EEXIST instead of replacing.
            guard linkat(source, sourceName, target, targetName, 0) == 0 else {
                throw FileOperationError.system("cannot move \(partial) to \(destination)")
            }
            unlinkat(source, sourceName, 0)
        }
        let sync = openat(target, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if sync >= 0 {
            fsync(sync)
            close(sync)
        }
        return attributes
    }

    // MARK: Paths

    /// Removes a file, or a directory only when it is empty; a missing one is not an error.
    public func remove(_ path: String) throws {
        // The caller's own file is never removed: it was the caller's before the download.
        if let anchor, anchor.kind == .file, path == anchor.path { return }
        let (directory, name) = try openDirectory(of: path)
        defer { close(directory) }
        guard unlinkat(directory, name, 0) != 0 else { return }
        switch errno {
        case ENOENT: return
        case EISDIR:
            // A directory goes only when it is empty (one a refused call made): one that holds
            // anything stays, and that is not an error.
            if unlinkat(directory, name, AT_REMOVEDIR) != 0, errno != ENOENT, errno != ENOTEMPTY, errno != EEXIST {
                throw FileOperationError.system("cannot remove the directory \(path)")
            }
        default:
            throw FileOperationError.system("cannot remove \(path)")
        }
    }

    /// Whether `path` is a directory this user reaches. One the user cannot reach answers like a
    /// missing one.
    public func isDirectory(_ path: String) -> Bool {
        if let anchor {
            guard anchor.kind == .directory else { return false }
            if path == anchor.path { return true }
            guard let fd = try? openDirectory(path) else { return false }
            close(fd)
            return true
        }
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether this user may create files in the directory `path`.
    public func isWritableDirectory(_ path: String) -> Bool {
        if anchor != nil { return isDirectory(path) }
        return isDirectory(path) && faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) == 0
    }

    /// Whether something (a link included) is at `path`, as far as this user can see.
    public func exists(_ path: String) -> Bool {
        var info = stat()
        if anchor != nil { return statBelowAnchor(path, &info) }
        return lstat(path, &info) == 0
    }

    /// Whether `path` is the regular file `identity` of this user (a link is not followed): how
    /// a restart finds the file it published before a crash kept it from recording so.
    public func isFile(_ path: String, identity: FileIdentity) -> Bool {
        var info = stat()
        let found = anchor != nil ? statBelowAnchor(path, &info) : lstat(path, &info) == 0
        return found && (info.st_mode & S_IFMT) == S_IFREG && info.st_uid == geteuid()
            && Self.identity(info) == identity
    }

    /// Makes a rename in `path` durable.
    public func syncDirectory(_ path: String) {
        let fd =
            anchor != nil
            ? ((try? openDirectory(path)).map { directory in
                defer { close(directory) }
                return openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            } ?? -1) : open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// The directory part of `path`, opened, and the last component.
    private func openDirectory(of path: String) throws -> (Int32, String) {
        let (directoryPath, name) = try split(path)
        return (try openDirectory(directoryPath), name)
    }

    /// The directory part of `path` and its last component.
    private func split(_ path: String) throws -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else {
            throw FileOperationError(.other, code: EINVAL, "\(path) is not an absolute path")
        }
        let name = String(path[path.index(after: slash)...])
        guard !name.isEmpty, name != ".", name != ".." else {
            throw FileOperationError(.other, code: EINVAL, "\(path) does not name a file")
        }
        return (slash == path.startIndex ? "/" : String(path[..<slash]), name)
    }

    /// `lstat` of a name below the anchor (the anchor's own file: `fstat` of its descriptor).
    private func statBelowAnchor(_ path: String, _ info: inout stat) -> Bool {
        if let anchor, anchor.kind == .file, path == anchor.path { return fstat(anchor.descriptor, &info) == 0 }
        guard let (directory, name) = try? openDirectory(of: path) else { return false }
        defer { close(directory) }
        return fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// `path` relative to `base` when it lies strictly below it (plain components only).
    static func relative(_ path: String, below base: String) -> String? {
        let prefix = base == "/" ? "/" : base + "/"
        guard path.hasPrefix(prefix) else { return nil }
        let rest = String(path.dropFirst(prefix.count))
        return DescriptorAnchor.isRelativePath(rest) ? rest : nil
    }

    // MARK: Directories

    /// Makes every directory of `relative` (plain components joined by "/") that is missing
    /// below `base` (the anchor's directory, or a directory the user named), each with `mkdirat`
    /// in the one before it and opened beneath it: a component that is a link (or anything but a
    /// directory) is refused, never followed. A directory made here gets `mode` (the caller's
    /// umask); one already there is left as it is.
    public func makeDirectories(_ relative: String, below base: String, mode: UInt32?) throws {
        guard DescriptorAnchor.isRelativePath(relative) else {
            throw FileOperationError(.other, code: EINVAL, "'\(relative)' is not a relative path of plain names")
        }
        let components = relative.split(separator: "/").map(String.init)
        if let anchor, base != anchor.path { throw outside(base) }
        var current = try openDirectory(base)
        defer { close(current) }
        var path = base
        for component in components {
            path = path == "/" ? "/" + component : path + "/" + component
            var made = false
            if mkdirat(current, component, 0o700) == 0 {
                made = true
            } else if errno != EEXIST {
                throw FileOperationError.system("cannot make the directory \(path)")
            }
            let next = uf_open_beneath(current, component, O_RDONLY | O_DIRECTORY, 0)
            guard next >= 0 else {
                let code = errno
                if code == ELOOP || code == ENOTDIR || code == EXDEV {
                    throw FileOperationError(
                        .other, code: ELOOP, "\(path) is a symbolic link or not a directory; nothing is made through it"
                    )
                }
                throw FileOperationError.system("cannot open the directory \(path)", code)
            }
            if made, let mode {
                // Files get the caller's umask as their mode; a directory the same, searchable where readable.
                let bits = mode & 0o666
                _ = fchmod(next, mode_t(bits | ((bits & 0o444) >> 2) | 0o700))
            }
            close(current)
            current = next
        }
    }

    private func outside(_ path: String) -> FileOperationError {
        FileOperationError(
            .other, code: EACCES, "\(path) is outside what the caller handed over; nothing is done there")
    }

    /// The directory `directoryPath`, opened `O_PATH`; with an anchor, a duplicate of the
    /// anchor's descriptor for the anchor's own directory, and a directory below it
    /// (`StartGroupAt`'s nested names) opened beneath it, never through a link or `..`.
    private func openDirectory(_ directoryPath: String) throws -> Int32 {
        if let anchor {
            guard anchor.kind == .directory else { throw outside(directoryPath) }
            if directoryPath == anchor.path {
                let fd = fcntl(anchor.descriptor, F_DUPFD_CLOEXEC, 3)
                guard fd >= 0 else { throw FileOperationError.system("cannot use the directory \(directoryPath)") }
                return fd
            }
            guard let relative = Self.relative(directoryPath, below: anchor.path) else { throw outside(directoryPath) }
            let fd = uf_open_beneath(anchor.descriptor, relative, uf_O_PATH | O_DIRECTORY, 0)
            guard fd >= 0 else {
                let code = errno
                if code == ELOOP || code == EXDEV {
                    throw FileOperationError(
                        .other, code: ELOOP, "\(directoryPath) passes through a symbolic link; nothing is done there")
                }
                throw FileOperationError(.other, code: ENOENT, "the directory \(directoryPath) does not exist")
            }
            return fd
        }
        let fd = open(directoryPath, uf_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            // Not there and not reachable read the same: the service is no oracle for paths.
            if code == EACCES || code == ENOENT || code == ENOTDIR {
                throw FileOperationError(.other, code: ENOENT, "the directory \(directoryPath) does not exist")
            }
            throw FileOperationError.system("cannot open the directory \(directoryPath)", code)
        }
        return fd
    }
}
