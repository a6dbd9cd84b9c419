import ArgumentParser
import DBus
import DownloadsClient

/// A task given as an id (`12`) or an object path.
struct TaskArgument: ExpressibleByArgument {
    let path: ObjectPath

    init?(argument: String) {
        guard let path = DownloadsProxy.taskPath(argument) else { return nil }
        self.path = path
    }
}
