import Crypto
import Foundation

/// The state directory: created 0700, and the HMAC key for resume data, created on first start
/// and readable only by the daemon.
enum StateDirectory {
    static func prepare(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        guard access(path, W_OK | X_OK) == 0 else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
    }

    static func resumeDataKey(in directory: String) throws -> SymmetricKey {
        let path = directory + "/resume-data.key"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            let key = SymmetricKey(size: .bits256)
            let bytes = key.withUnsafeBytes { Array($0) }
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
            close(fd)
            guard written == bytes.count else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
            return key
        }
        guard errno == EEXIST else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        guard let data = FileManager.default.contents(atPath: path), data.count == 32 else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "\(path) is not a 32-byte key"])
        }
        return SymmetricKey(data: data)
    }
}
