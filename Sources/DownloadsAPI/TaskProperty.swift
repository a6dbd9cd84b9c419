import DBus

/// The properties of `org.example.Downloads.Task`: one table that gives the interface
/// declaration, and the names the service fills in for Get, GetAll and PropertiesChanged.
public enum TaskProperty: String, Sendable, Hashable, CaseIterable {
    case id = "Id"
    case session = "Session"
    case url = "URL"
    case destination = "Destination"
    case state = "State"
    case bytesWritten = "BytesWritten"
    case bytesExpected = "BytesExpected"
    case error = "Error"
    case errorMessage = "ErrorMessage"
    /// v1.1: why a queued task does not run yet (`""`, `slot`, `network`, `unmetered-network`;
    /// v1.2: `begin-time`, and `yielding` for a running background task).
    case waitingFor = "WaitingFor"
    /// v1.1: the `desktop_entry` option (`""` when not given).
    case desktopEntry = "DesktopEntry"
    /// v1.2: the `background` option.
    case background = "Background"
    /// v1.2: the `title`, `description` and `metadata` options (`""` and empty when not given).
    case title = "Title"
    case description = "Description"
    case metadata = "Metadata"
    /// v1.3: the sandboxed app the task belongs to (its app id), `""` for a host caller's task.
    case app = "App"
    /// v1.3: `download` or `upload`.
    case kind = "Kind"
    /// v1.3: an upload's file (its path, or where its descriptor led), `""` for a download.
    case source = "Source"
    /// v1.3: an upload's final response status, 0 until there is one (and for a download).
    case responseStatus = "ResponseStatus"
    /// v1.3: a resumable upload's bytes the server confirmed (its durable offset; 0 for a plain
    /// upload until it finished, and for a download).
    case bytesConfirmed = "BytesConfirmed"
    /// v1.3: the `priority` option (`low`, `normal`, `high`), changed by `Update`.
    case priority = "Priority"
    /// v1.3: the `max_bytes_per_second` option (0: no limit), changed by `Update`.
    case maxBytesPerSecond = "MaxBytesPerSecond"
    /// v1.3: bytes a second over the last few seconds while running, 0 otherwise.
    case speed = "Speed"
    /// v1.4: while `WaitingFor` is `app`, the question its app is asked: `kind` s, `realm` s
    /// (the server's words, for a sign-in prompt), `host` s; empty otherwise.
    case question = "Question"
    /// v1.4: the `add_to_recent` option: the desktop agent adds the finished file to the user's
    /// recently used files when the system daemon ran it (root never writes a user's files).
    case addToRecent = "AddToRecent"
    /// v1.5: a finished download's `Last-Modified` from its server (Unix seconds; 0 when it
    /// gave none, and for an upload). A download's `ResponseStatus` is its last response's
    /// status that brought bytes (200, 206), 304 for a conditional one found current.
    case lastModified = "LastModified"

    public var name: String { rawValue }

    public var type: DBusType {
        switch self {
        case .id: return .uint64
        case .lastModified: return .int64
        case .responseStatus: return .uint32
        case .kind, .source, .priority: return .string
        case .maxBytesPerSecond, .speed: return .uint64
        case .session, .url, .destination, .state, .error, .errorMessage, .waitingFor, .desktopEntry, .app:
            return .string
        case .bytesWritten, .bytesExpected, .bytesConfirmed: return .int64
        case .background, .addToRecent: return .boolean
        case .title, .description: return .string
        case .metadata, .question: return .dictionary(key: .string, value: .variant)
        }
    }

    /// Never changes while the task exists (not in PropertiesChanged).
    public var isConstant: Bool {
        switch self {
        case .id, .session, .desktopEntry, .app, .kind, .source, .addToRecent: return true
        default: return false
        }
    }

    public var declaration: InterfaceDescription.Property {
        .init(name, type, emitsChanged: isConstant ? .const : .true)
    }

    /// What a `PropertiesChanged` after a state change carries: not `URL`, which changes only by
    /// `SetURL` (or ResumeWithData with `url`), nor what `Update` changes: each has a
    /// `PropertiesChanged` of its own then.
    public static let changing: [TaskProperty] = allCases.filter {
        !$0.isConstant && !options.contains($0) && $0 != .url
    }
    /// What `Update` (and `ResumeWithData`'s options) may change.
    public static let options: [TaskProperty] = [
        .background, .title, .description, .metadata, .priority, .maxBytesPerSecond,
    ]
}
