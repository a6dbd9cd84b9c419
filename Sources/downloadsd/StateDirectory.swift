import Crypto
import Foundation

/// The state directory: the daemon's alone. Created 0700 (under umask 077, so every file in it
/// is 0600); an existing one of the daemon's own with group or other access is tightened (and
/// said so); one that is a symlink, not a directory, or owned by another uid is refused, since
/// whoever owns it could read the resume-data key or rewrite the database.
enum StateDirectory {
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// Prepares `path`; returns what it changed, for the log.
    static func prepare(_ path: String) throws -> [String] {
        var notes: [String] = []
        var info = stat()
        if lstat(path, &info) != 0 {
            guard errno == ENOENT else {
                throw Refusal(description: "cannot inspect \(path): \(String(cString: strerror(errno)))")
            }
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            guard lstat(path, &info) == 0 else { throw Refusal(description: "cannot create \(path)") }
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw Refusal(description: "\(path) is not a directory (a symlink or a file is refused)")
        }
        guard info.st_uid == geteuid() else {
            throw Refusal(
                description:
                    "\(path) belongs to uid \(info.st_uid), not to the daemon's uid \(geteuid()); refusing to use it")
        }
        if info.st_mode & 0o077 != 0 {
            guard chmod(path, 0o700) == 0 else {
                throw Refusal(description: "cannot chmod 0700 \(path): \(String(cString: strerror(errno)))")
            }
            notes.append("\(path) was mode \(String(info.st_mode & 0o777, radix: 8)); tightened to 0700")
        }
        guard access(path, W_OK | X_OK) == 0 else {
            throw Refusal(description: "\(path) is not writable by the daemon")
        }
        for name in [
            "downloads.sqlite", "downloads.sqlite-wal", "downloads.sqlite-shm", "resume-data.key", "share-key.pem",
            "share-certificate.pem", "shared.json",
        ] {
            let file = path + "/" + name
            guard lstat(file, &info) == 0 else { continue }
            guard (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
                throw Refusal(description: "\(file) is not a regular file of the daemon's uid; refusing to use it")
            }
            if info.st_mode & 0o077 != 0 {
                chmod(file, 0o600)
                notes.append("\(file) was mode \(String(info.st_mode & 0o777, radix: 8)); tightened to 0600")
            }
        }
        return notes
    }

    static func resumeDataKey(in directory: String) throws -> SymmetricKey {
        let path = directory + "/resume-data.key"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 {
            let key = SymmetricKey(size: .bits256)
            let bytes = key.withUnsafeBytes { Array($0) }
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
            close(fd)
            guard written == bytes.count else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
            }
            return key
        }
        guard errno == EEXIST else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        guard let data = FileManager.default.contents(atPath: path), data.count == 32 else {
            throw CocoaError(
                .fileReadCorruptFile,
                userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "\(path) is not a 32-byte key"])
        }
        return SymmetricKey(data: data)
    }
}
