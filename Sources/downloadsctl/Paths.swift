import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Paths and ids as the command line takes and prints them.
enum Paths {
    /// `path` made absolute against the current directory (the service needs absolute paths).
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        let base = FileManager.default.currentDirectoryPath
        return path == "." ? base : (base.hasSuffix("/") ? base : base + "/") + path
    }

    /// Writes resume data to `file` (mode 0600: it holds the download's URL and sealed headers).
    static func writeResumeData(_ data: Data, to file: String) throws {
        let path = absolute(file)
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            throw CommandFailure(message: "paused, but cannot write the resume data to \(path)")
        }
    }

    /// The id of a task or group path, or the path.
    static func id(_ path: ObjectPath) -> String {
        (DownloadsAPI.taskID(path) ?? DownloadsAPI.groupID(path)).map(String.init) ?? path.rawValue
    }
}
