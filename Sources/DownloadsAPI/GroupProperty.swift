import DBus

/// The properties of `org.example.Downloads.Group` (v1.3): one table for the declaration and for
/// Get, GetAll and PropertiesChanged.
public enum GroupProperty: String, Sendable, Hashable, CaseIterable {
    case id = "Id"
    case session = "Session"
    case title = "Title"
    /// The task states: `running` while a file runs, `finished` once every file is, `failed` once
    /// a file failed for good (an atomic group) or none is left to run, `paused`, `queued`, `cancelled`.
    case state = "State"
    case files = "Files"
    case filesFinished = "FilesFinished"
    case filesFailed = "FilesFailed"
    case bytesWritten = "BytesWritten"
    /// -1 while a file's length is unknown.
    case bytesExpected = "BytesExpected"
    case tasks = "Tasks"
    case atomic = "Atomic"

    public var name: String { rawValue }

    public var type: DBusType {
        switch self {
        case .id: return .uint64
        case .session, .title, .state: return .string
        case .files, .filesFinished, .filesFailed: return .uint32
        case .bytesWritten, .bytesExpected: return .int64
        case .tasks: return .array(.objectPath)
        case .atomic: return .boolean
        }
    }

    public var isConstant: Bool {
        switch self {
        case .id, .session, .title, .atomic: return true
        default: return false
        }
    }

    public var declaration: InterfaceDescription.Property {
        .init(name, type, emitsChanged: isConstant ? .const : .true)
    }
}
