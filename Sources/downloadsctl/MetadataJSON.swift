import DBus

/// A metadata value as `--json` prints it: a JSON string, number or boolean (its D-Bus type is
/// the service's to keep; a script reads the value).
struct MetadataJSON: Encodable {
    let value: DBusValue

    func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch value {
        case .byte(let v): try container.encode(v)
        case .boolean(let v): try container.encode(v)
        case .int16(let v): try container.encode(v)
        case .uint16(let v): try container.encode(v)
        case .int32(let v): try container.encode(v)
        case .uint32(let v): try container.encode(v)
        case .int64(let v): try container.encode(v)
        case .uint64(let v): try container.encode(v)
        case .double(let v) where v.isFinite: try container.encode(v)
        default: try container.encode(value.stringValue ?? "")
        }
    }

    /// The value as `status` prints it.
    static func text(_ value: DBusValue) -> String {
        switch value {
        case .byte(let v): return String(v)
        case .boolean(let v): return String(v)
        case .int16(let v): return String(v)
        case .uint16(let v): return String(v)
        case .int32(let v): return String(v)
        case .uint32(let v): return String(v)
        case .int64(let v): return String(v)
        case .uint64(let v): return String(v)
        case .double(let v): return String(v)
        default: return value.stringValue ?? ""
        }
    }
}
