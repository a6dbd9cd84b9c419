#if canImport(Glibc)
import Glibc
#endif

/// A directory, or one regular file, that a caller opened and handed over by descriptor
/// (`StartAt`): every file a task makes is made through it, with `openat` and `renameat` below
/// it, so the caller's sandbox holds (a read-only bind mount stays read-only, a directory the
/// caller cannot name is never reached by path). `path` is where the descriptor leads as this
/// process sees it (`/proc/self/fd`): shown to people and used only to find, after a restart,
/// the file the descriptor created.
public final class DescriptorAnchor: Sendable {
    public enum Kind: UInt8, Sendable {
        case directory = 1
        /// A regular file the caller opened for writing: written in place.
        case file = 2
    }

    public let descriptor: Int32
    public let kind: Kind
    public let path: String

    /// Takes ownership of `descriptor`.
    public init(owning descriptor: Int32, kind: Kind, path: String) {
        self.descriptor = descriptor
        self.kind = kind
        self.path = path
    }

    deinit { close(descriptor) }

    /// Checks a descriptor a caller handed over and takes a duplicate of it: a directory, or a
    /// regular file opened for writing (`name` is then empty). A directory on a read-only mount
    /// (a sandbox's `--ro-bind`) is refused here, before anything is tried in it.
    public static func make(duplicating fd: Int32) throws -> DescriptorAnchor {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw FileOperationError.system("the descriptor cannot be inspected") }
        let kind: Kind
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            kind = .directory
        case S_IFREG:
            let mode = fcntl(fd, F_GETFL)
            guard mode >= 0, (mode & O_ACCMODE) == O_WRONLY || (mode & O_ACCMODE) == O_RDWR else {
                throw FileOperationError(.other, code: EBADF, "the file descriptor is not open for writing")
            }
            kind = .file
        default:
            throw FileOperationError(.other, code: EINVAL, "the descriptor is neither a directory nor a regular file")
        }
        var volume = statvfs()
        if fstatvfs(fd, &volume) == 0, (volume.f_flag & UInt(ST_RDONLY)) != 0 {
            throw FileOperationError(
                .other, code: EROFS, "the \(kind == .directory ? "directory" : "file") is on a read-only file system")
        }
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 3)
        guard copy >= 0 else { throw FileOperationError.system("the descriptor cannot be duplicated") }
        return DescriptorAnchor(owning: copy, kind: kind, path: Self.path(of: copy))
    }

    /// Where a descriptor leads, as this process sees it (`readlink /proc/self/fd/N`).
    public static func path(of fd: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard count > 0 else { return "/proc/self/fd/\(fd)" }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `name` may be created in an anchor directory: one path component, not `.` or
    /// `..`, no NUL, at most 255 bytes.
    public static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.utf8.contains(0)
            && name.utf8.count <= 255
    }

    /// Whether `path` is plain names joined by "/" (`StartGroupAt`'s names, a Metalink file's
    /// `name`): nothing absolute, no `.`, `..` or empty component.
    public static func isRelativePath(_ path: String) -> Bool {
        path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { isPlainName(String($0)) }
    }
}
