import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

/// A group id or object path.
struct GroupArgument: ExpressibleByArgument {
    let path: ObjectPath

    init?(argument: String) {
        guard let path = DownloadsProxy.groupPath(argument) else { return nil }
        self.path = path
    }
}
