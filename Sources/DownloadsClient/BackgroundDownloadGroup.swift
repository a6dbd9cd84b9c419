import DBus
import DownloadsAPI
import FoundationEssentials

/// A group of a `DownloadSession`: many files as one job, started at once
/// (`DownloadSession.downloadGroup`). Its files are tasks of the session too (`tasks`); the
/// delegate hears the group's progress and its end (`downloadSession(_:group:…)`), and its
/// files' own events only when the group was started with `taskSignals`.
public final class BackgroundDownloadGroup: Sendable, Hashable, CustomStringConvertible {
    private let proxy: DownloadsProxy
    /// The group's object in the service.
    public let path: ObjectPath
    /// Its files' tasks, in the order given (a Metalink document of several files gives one each).
    public let tasks: [BackgroundDownloadTask]

    init(proxy: DownloadsProxy, path: ObjectPath, tasks: [BackgroundDownloadTask]) {
        self.proxy = proxy
        self.path = path
        self.tasks = tasks
    }

    /// The service's id of the group.
    public var identifier: UInt64 { DownloadsAPI.groupID(path) ?? 0 }

    /// What the service says of the group now.
    public func status() async throws -> DownloadGroupStatus { try await proxy.groupStatus(path) }

    /// Pauses every file; returns the group's resume data (`DownloadSession.downloadGroup(withResumeData:)`).
    public func pause() async throws -> Data { try await proxy.pauseGroup(path) }

    /// Resumes the paused and failed files.
    public func resume() async throws { try await proxy.resumeGroup(path) }

    /// Cancels the files that have not ended (their partial files are removed).
    public func cancel() async throws { try await proxy.cancelGroup(path) }

    public var description: String { "BackgroundDownloadGroup(\(path))" }

    public static func == (lhs: BackgroundDownloadGroup, rhs: BackgroundDownloadGroup) -> Bool { lhs.path == rhs.path }
    public func hash(into hasher: inout Hasher) { hasher.combine(path) }
}
