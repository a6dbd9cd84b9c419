import DownloadsAPI

/// One file of a group to start (`DownloadsProxy.startGroup`): a URL ("" with a `metalink`
/// option), a destination as `start` takes it (a file, or a directory for the server's name),
/// and the file's own options over the group's.
public struct DownloadGroupFile: Sendable {
    public var url: String
    public var destination: String
    public var options: TaskOptions

    public init(url: String, destination: String, options: TaskOptions = TaskOptions()) {
        self.url = url
        self.destination = destination
        self.options = options
    }
}
