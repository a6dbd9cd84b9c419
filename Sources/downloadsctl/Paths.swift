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

    /// The id of a task path, or the path.
    static func id(_ path: ObjectPath) -> String {
        (DownloadsAPI.taskID(path) ?? DownloadsAPI.groupID(path)).map(String.init) ?? path.rawValue
    }
}
