import DBus
import DownloadsAPI

/// What the service says about one group (its `org.example.Downloads.Group` properties).
public struct DownloadGroupStatus: Sendable, Hashable, Codable {
    public var id: UInt64
    public var session: String
    public var title: String
    /// The task states: `running` while a file runs, `finished` once every file is, `failed`,
    /// `paused`, `queued`, `cancelled`.
    public var state: String
    public var files: UInt32
    public var filesFinished: UInt32
    public var filesFailed: UInt32
    public var bytesWritten: Int64
    /// -1 while a file's length is unknown.
    public var bytesExpected: Int64
    public var tasks: [String]
    public var atomic: Bool

    enum CodingKeys: String, CodingKey {
        case id, session, title, state, files, atomic, tasks
        case filesFinished = "files_finished", filesFailed = "files_failed"
        case bytesWritten = "bytes_written", bytesExpected = "bytes_expected"
    }

    /// From the properties `GetAll` returned.
    public init(properties: [String: DBusValue]) throws {
        func value(_ property: GroupProperty) throws -> DBusValue {
            guard let value = properties[property.name]?.variantValue ?? properties[property.name] else {
                throw DownloadsClientError(name: BusError.invalidArgsName, message: "the group has no \(property.name)")
            }
            return value
        }
        id = try value(.id).uint64Value ?? 0
        session = try value(.session).stringValue ?? ""
        title = try value(.title).stringValue ?? ""
        state = try value(.state).stringValue ?? ""
        files = try value(.files).uint32Value ?? 0
        filesFinished = try value(.filesFinished).uint32Value ?? 0
        filesFailed = try value(.filesFailed).uint32Value ?? 0
        bytesWritten = try value(.bytesWritten).int64Value ?? 0
        bytesExpected = try value(.bytesExpected).int64Value ?? -1
        tasks = (try value(.tasks).objectPathArrayValue ?? []).map(\.rawValue)
        atomic = try value(.atomic).boolValue ?? false
    }
}
