import DBus
import DownloadsAPI
import FoundationEssentials
import NIOConcurrencyHelpers

/// One download of a `DownloadSession` (the `URLSessionDownloadTask` of this service). Like
/// URLSession's, a new task is suspended until `resume()`, which hands it to the service; the
/// service then runs it whether or not this process lives.
public final class BackgroundDownloadTask: Sendable, Hashable, CustomStringConvertible {
    enum Origin: Sendable {
        case url(String, destination: String, options: TaskOptions)
        /// An upload of the file `source` (`Upload`, or `UploadAt` inside a sandbox).
        case upload(String, source: String, options: TaskOptions)
        case resumeData(Data, options: TaskOptions)
        case existing
    }

    private let origin: Origin
    private let proxy: DownloadsProxy
    /// Tells the session a start is on its way (`nil`), and then its path (or `nil` again when
    /// it failed), so that signals arriving before Start's reply are matched to this task.
    private let onStart: @Sendable (BackgroundDownloadTask, _ phase: StartPhase) -> Void

    enum StartPhase: Sendable {
        case starting
        case started(ObjectPath)
        case failed
    }
    private let path = NIOLockedValueBox<ObjectPath?>(nil)

    /// What the app gave the task to describe it (URLSession's `taskDescription`, BITS' display
    /// name and description): known from the options it was made with, or from the service
    /// once its status was read (`status()`, `DownloadSession.allTasks()`).
    struct Fields: Sendable {
        var title: String?
        var taskDescription: String?
        var metadata: [String: DBusValue] = [:]
        var isUpload = false
    }
    private let fields = NIOLockedValueBox(Fields())

    /// The `title` option: what the desktop shows for the download.
    public var title: String? { fields.withLockedValue { $0.title } }
    /// The `description` option (URLSession's `taskDescription`).
    public var taskDescription: String? { fields.withLockedValue { $0.taskDescription } }
    /// The `metadata` option: the app's own data (`DownloadSession.tasks(matching:)` finds tasks by it).
    public var metadata: [String: DBusValue] { fields.withLockedValue { $0.metadata } }

    /// Whether the task sends a file (`DownloadSession.uploadTask`), rather than fetching one:
    /// its progress is `didSendBodyData`, and its end brings the server's reply.
    public var isUpload: Bool { fields.withLockedValue { $0.isUpload } }

    /// Takes the fields from what the service says of the task.
    func learn(_ status: DownloadTaskStatus) {
        fields.withLockedValue { fields in
            fields.title = status.title.isEmpty ? nil : status.title
            fields.taskDescription = status.taskDescription.isEmpty ? nil : status.taskDescription
            fields.metadata = status.metadata
            fields.isUpload = status.isUpload
        }
    }

    init(
        proxy: DownloadsProxy, origin: Origin, path: ObjectPath? = nil,
        onStart: @escaping @Sendable (BackgroundDownloadTask, StartPhase) -> Void
    ) {
        self.proxy = proxy
        self.origin = origin
        self.onStart = onStart
        self.path.withLockedValue { $0 = path }
        switch origin {
        case .url(_, _, let options), .upload(_, _, let options):
            fields.withLockedValue {
                $0 = Fields(
                    title: options.title, taskDescription: options.taskDescription, metadata: options.metadata ?? [:])
                if case .upload = origin { $0.isUpload = true }
            }
        case .resumeData, .existing:
            break
        }
    }

    /// The task's object path, once the service has it.
    public var objectPath: ObjectPath? { path.withLockedValue { $0 } }

    /// The service's id of the task (the `<id>` of its object path), once it has one.
    public var taskIdentifier: UInt64? { objectPath.flatMap(DownloadsAPI.taskID) }

    public var description: String { objectPath?.rawValue ?? "(not started)" }

    /// Starts the task (the first time) or resumes it (after `pause()` or a failure).
    public func resume() async throws {
        if let existing = objectPath {
            try await proxy.resume(existing)
            return
        }
        let created: ObjectPath
        onStart(self, .starting)
        do {
            switch origin {
            case .url(let url, let destination, let options):
                created = try await proxy.start(url: url, destination: destination, options: options)
            case .upload(let url, let source, let options):
                created = try await proxy.upload(url: url, source: source, options: options)
            case .resumeData(let data, let options):
                created = try await proxy.resume(resumeData: data, options: options)
            case .existing:
                throw DownloadsClientError(
                    name: DownloadsErrorName.notFound.fullName, message: "the task has no object path")
            }
        } catch {
            onStart(self, .failed)
            throw error
        }
        path.withLockedValue { $0 = created }
        onStart(self, .started(created))
    }

    /// Pauses the task and returns its resume data (`cancel(byProducingResumeData:)`, but the
    /// task stays listed, paused, and `resume()` also continues it).
    public func pause() async throws -> Data {
        try await proxy.pause(try started())
    }

    /// Cancels the task (removes its partial file); cancelling an ended task removes it from the list.
    public func cancel() async throws {
        try await proxy.cancel(try started())
    }

    /// Changes the running (or queued, or paused) task: its priority (`URLSessionTask.priority`),
    /// bandwidth limit, headers, title… (`Update`; the keys of `TaskOptions.updateKeys`).
    public func update(_ options: TaskOptions) async throws {
        try await proxy.update(try started(), options: options)
    }

    /// `task.priority = …` of `URLSessionTask`, as the service's three levels.
    public func setPriority(_ priority: TaskOptions.Priority) async throws {
        var options = TaskOptions()
        options.priority = priority
        try await update(options)
    }

    /// An upload's final response and its body (at most 1 MiB), once it ended.
    public func reply() async throws -> (UploadResponse, Data) {
        let reply = try await proxy.reply(try started())
        return (UploadResponse(statusCode: Int(reply.status), headers: reply.headers), Data(reply.body))
    }

    /// The service's current view of the task.
    public func status() async throws -> DownloadTaskStatus {
        let status = try await proxy.status(try started())
        learn(status)
        return status
    }

    private func started() throws -> ObjectPath {
        guard let path = objectPath else {
            throw DownloadsClientError(
                name: DownloadsErrorName.wrongState.fullName, message: "the task was not started (call resume())")
        }
        return path
    }

    public static func == (a: BackgroundDownloadTask, b: BackgroundDownloadTask) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
