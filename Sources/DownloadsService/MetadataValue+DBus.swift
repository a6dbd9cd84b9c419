import DBus
import DownloadEngine
import DownloadModel

/// A task's metadata between D-Bus and the engine: the same basic type either way.
extension MetadataValue {
    /// nil for a type metadata does not take (`TaskOptions.isMetadataValue`).
    init?(_ value: DBusValue) {
        switch value {
        case .byte(let v): self = .byte(v)
        case .boolean(let v): self = .boolean(v)
        case .int16(let v): self = .int16(v)
        case .uint16(let v): self = .uint16(v)
        case .int32(let v): self = .int32(v)
        case .uint32(let v): self = .uint32(v)
        case .int64(let v): self = .int64(v)
        case .uint64(let v): self = .uint64(v)
        case .double(let v): self = .double(v)
        case .string(let v): self = .string(v)
        case .objectPath(let v): self = .objectPath(v.rawValue)
        case .signature(let v): self = .signature(v)
        default: return nil
        }
    }

    var dbusValue: DBusValue {
        switch self {
        case .byte(let v): return .byte(v)
        case .boolean(let v): return .boolean(v)
        case .int16(let v): return .int16(v)
        case .uint16(let v): return .uint16(v)
        case .int32(let v): return .int32(v)
        case .uint32(let v): return .uint32(v)
        case .int64(let v): return .int64(v)
        case .uint64(let v): return .uint64(v)
        case .double(let v): return .double(v)
        case .string(let v): return .string(v)
        // Stored from a checked path, so it parses; a row edited by hand reads as a string.
        case .objectPath(let v): return (try? ObjectPath(v)).map { .objectPath($0) } ?? .string(v)
        case .signature(let v): return .signature(v)
        }
    }

    /// A dictionary of checked values (`TaskOptions.checkedMetadata`) for the engine.
    static func dictionary(_ values: [String: DBusValue]) -> [String: MetadataValue] {
        values.compactMapValues(MetadataValue.init)
    }
}
