import DBus
import DownloadsAPI

/// What the service says about one task (its `org.example.Downloads.Task` properties).
public struct DownloadTaskStatus: Sendable, Hashable, Codable {
    public var id: UInt64
    public var session: String
    public var url: String
    /// The destination as given, or the file once it is known.
    public var destination: String
    /// `queued`, `running`, `paused`, `retrying`, `finished`, `failed` or `cancelled`.
    public var state: String
    public var bytesWritten: Int64
    /// -1 while unknown.
    public var bytesExpected: Int64
    /// The full error name of a failed task, or "".
    public var error: String
    public var errorMessage: String
    /// Why a queued task does not run yet: "", `slot`, `network`, `unmetered-network`,
    /// `begin-time`, `ac-power`, `power-saver` or `app` (its app is asked to sign in, `HandleChallenge`); for a running background task, `yielding` while it gives way to other traffic.
    public var waitingFor: String
    /// The app the task was started for (its desktop file id), or "".
    public var desktopEntry: String
    /// A background task (it uses only the bandwidth nobody else is using).
    public var background: Bool
    /// What the app calls the download (`title`), or "".
    public var title: String
    /// A line about it (the `description` option, URLSession's `taskDescription`), or "".
    public var taskDescription: String
    /// The sandboxed app the task belongs to (its app id, e.g. a Flatpak's), or "" for a task a
    /// host program started.
    public var app: String = ""
    /// `download` or `upload`.
    public var kind: String = "download"
    /// An upload's file, "" for a download.
    public var source: String = ""
    /// An upload's final response status, 0 until there is one.
    public var responseStatus: UInt32 = 0
    /// A resumable upload's bytes the server confirmed (what a cut, a pause or a restart keeps).
    public var bytesConfirmed: Int64 = 0
    /// `low`, `normal` or `high` (`Update` changes it).
    public var priority: String = "normal"
    /// The task's bandwidth limit in bytes a second, 0 for none (`Update` changes it).
    public var maxBytesPerSecond: UInt64 = 0
    /// Bytes a second over the last few seconds while running, as the service measures it; 0 otherwise.
    public var speed: UInt64 = 0
    /// The app's own data (`metadata`), values of D-Bus basic types. Not in the Codable form.
    public var metadata: [String: DBusValue] = [:]
    /// While `waitingFor` is `app`: the question its app is asked (`kind`, `realm`, `host`). Not
    /// in the Codable form.
    public var question: [String: String] = [:]
    /// The task asked for its finished file to go into the user's recently used files
    /// (`add_to_recent`). Not in the Codable form.
    public var addToRecent = false
    /// v1.5: a finished download's `Last-Modified` (Unix seconds; 0 none).
    public var lastModified: Int64 = 0

    enum CodingKeys: String, CodingKey {
        case id, session, url, destination, state
        case bytesWritten = "bytes_written", bytesExpected = "bytes_expected", error, errorMessage = "error_message"
        case waitingFor = "waiting_for", desktopEntry = "desktop_entry", background, title
        case taskDescription = "description"
        case app, kind, source
        case responseStatus = "response_status"
        case bytesConfirmed = "bytes_confirmed"
        case priority, maxBytesPerSecond = "max_bytes_per_second", speed
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UInt64.self, forKey: .id)
        session = try container.decode(String.self, forKey: .session)
        url = try container.decode(String.self, forKey: .url)
        destination = try container.decode(String.self, forKey: .destination)
        state = try container.decode(String.self, forKey: .state)
        bytesWritten = try container.decode(Int64.self, forKey: .bytesWritten)
        bytesExpected = try container.decode(Int64.self, forKey: .bytesExpected)
        error = try container.decode(String.self, forKey: .error)
        errorMessage = try container.decode(String.self, forKey: .errorMessage)
        waitingFor = try container.decode(String.self, forKey: .waitingFor)
        desktopEntry = try container.decode(String.self, forKey: .desktopEntry)
        background = try container.decode(Bool.self, forKey: .background)
        title = try container.decode(String.self, forKey: .title)
        taskDescription = try container.decode(String.self, forKey: .taskDescription)
        app = try container.decodeIfPresent(String.self, forKey: .app) ?? ""
        kind = try container.decodeIfPresent(String.self, forKey: .kind) ?? "download"
        source = try container.decodeIfPresent(String.self, forKey: .source) ?? ""
        responseStatus = try container.decodeIfPresent(UInt32.self, forKey: .responseStatus) ?? 0
        bytesConfirmed = try container.decodeIfPresent(Int64.self, forKey: .bytesConfirmed) ?? 0
        priority = try container.decodeIfPresent(String.self, forKey: .priority) ?? "normal"
        maxBytesPerSecond = try container.decodeIfPresent(UInt64.self, forKey: .maxBytesPerSecond) ?? 0
        speed = try container.decodeIfPresent(UInt64.self, forKey: .speed) ?? 0
    }

    public var isUpload: Bool { kind == "upload" }

    init(properties: [String: DBusValue]) throws {
        func string(_ property: TaskProperty) -> String { properties[property.name]?.stringValue ?? "" }
        guard let id = properties[TaskProperty.id.name]?.uint64Value else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no task id")
        }
        self.id = id
        session = string(.session)
        url = string(.url)
        destination = string(.destination)
        state = string(.state)
        bytesWritten = properties[TaskProperty.bytesWritten.name]?.int64Value ?? 0
        bytesExpected = properties[TaskProperty.bytesExpected.name]?.int64Value ?? -1
        error = string(.error)
        errorMessage = string(.errorMessage)
        waitingFor = string(.waitingFor)
        desktopEntry = string(.desktopEntry)
        background = properties[TaskProperty.background.name]?.boolValue ?? false
        title = string(.title)
        taskDescription = string(.description)
        metadata = properties[TaskProperty.metadata.name]?.vardictValue ?? [:]
        app = string(.app)
        kind = properties[TaskProperty.kind.name]?.stringValue ?? "download"
        source = string(.source)
        responseStatus = properties[TaskProperty.responseStatus.name]?.uint32Value ?? 0
        bytesConfirmed = properties[TaskProperty.bytesConfirmed.name]?.int64Value ?? 0
        priority = properties[TaskProperty.priority.name]?.stringValue ?? "normal"
        maxBytesPerSecond = properties[TaskProperty.maxBytesPerSecond.name]?.uint64Value ?? 0
        speed = properties[TaskProperty.speed.name]?.uint64Value ?? 0
        question = Self.question(properties[TaskProperty.question.name])
        addToRecent = properties[TaskProperty.addToRecent.name]?.boolValue ?? false
        lastModified = properties[TaskProperty.lastModified.name]?.int64Value ?? 0
    }

    private static func question(_ value: DBusValue?) -> [String: String] {
        (value?.vardictValue ?? [:]).compactMapValues(\.stringValue)
    }

    /// The title, else the file's name (what a person is shown).
    public var displayName: String {
        if !title.isEmpty { return title }
        let name = (isUpload ? source : destination).split(separator: "/").last.map(String.init) ?? destination
        return name.isEmpty ? (isUpload ? source : destination) : name
    }

    /// Applies a `PropertiesChanged` of the task.
    public mutating func apply(_ changed: [String: DBusValue]) {
        for (name, value) in changed {
            guard let property = TaskProperty(rawValue: name) else { continue }
            switch property {
            case .destination: destination = value.stringValue ?? destination
            case .state: state = value.stringValue ?? state
            case .bytesWritten: bytesWritten = value.int64Value ?? bytesWritten
            case .bytesExpected: bytesExpected = value.int64Value ?? bytesExpected
            case .error: error = value.stringValue ?? error
            case .errorMessage: errorMessage = value.stringValue ?? errorMessage
            case .waitingFor: waitingFor = value.stringValue ?? waitingFor
            case .url: url = value.stringValue ?? url
            case .responseStatus: responseStatus = value.uint32Value ?? responseStatus
            case .bytesConfirmed: bytesConfirmed = value.int64Value ?? bytesConfirmed
            case .priority: priority = value.stringValue ?? priority
            case .maxBytesPerSecond: maxBytesPerSecond = value.uint64Value ?? maxBytesPerSecond
            case .speed: speed = value.uint64Value ?? speed
            case .background: background = value.boolValue ?? background
            case .title: title = value.stringValue ?? title
            case .description: taskDescription = value.stringValue ?? taskDescription
            case .metadata: metadata = value.vardictValue ?? metadata
            case .question: question = Self.question(value)
            case .lastModified: lastModified = value.int64Value ?? lastModified
            case .id, .kind, .source, .session, .desktopEntry, .app, .addToRecent: break
            }
        }
    }

    public var isEnded: Bool { ["finished", "failed", "cancelled"].contains(state) }
}
