/// One value of a task's `metadata` (the app's own data, `a{sv}` of D-Bus basic types), kept
/// with its type so the app reads back exactly what it gave and `FindTasks` matches by type and
/// value, as GVariant's equality does. Written as `{"<D-Bus type code>": value}` in the store and
/// in resume data.
public enum MetadataValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)

    /// The D-Bus type code.
    public var typeCode: String {
        switch self {
        case .byte: return "y"
        case .boolean: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        }
    }
}

extension MetadataValue {
    /// At most how many bytes its stored JSON (`{"s":"…"}`) takes: every byte of text escaped as
    /// `\uXXXX` (six), a number in its longest form.
    public var storedBytesBound: Int {
        switch self {
        case .string(let text), .objectPath(let text), .signature(let text): return 8 + 6 * text.utf8.count
        default: return 8 + 32
        }
    }
}

extension MetadataValue: Codable {
    private struct TypeCode: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: TypeCode.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a metadata value has one type"))
        }
        switch key.stringValue {
        case "y": self = .byte(try container.decode(UInt8.self, forKey: key))
        case "b": self = .boolean(try container.decode(Bool.self, forKey: key))
        case "n": self = .int16(try container.decode(Int16.self, forKey: key))
        case "q": self = .uint16(try container.decode(UInt16.self, forKey: key))
        case "i": self = .int32(try container.decode(Int32.self, forKey: key))
        case "u": self = .uint32(try container.decode(UInt32.self, forKey: key))
        case "x": self = .int64(try container.decode(Int64.self, forKey: key))
        case "t": self = .uint64(try container.decode(UInt64.self, forKey: key))
        case "d": self = .double(try container.decode(Double.self, forKey: key))
        case "s": self = .string(try container.decode(String.self, forKey: key))
        case "o": self = .objectPath(try container.decode(String.self, forKey: key))
        case "g": self = .signature(try container.decode(String.self, forKey: key))
        default:
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown metadata type"))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: TypeCode.self)
        let key = TypeCode(stringValue: typeCode)
        switch self {
        case .byte(let v): try container.encode(v, forKey: key)
        case .boolean(let v): try container.encode(v, forKey: key)
        case .int16(let v): try container.encode(v, forKey: key)
        case .uint16(let v): try container.encode(v, forKey: key)
        case .int32(let v): try container.encode(v, forKey: key)
        case .uint32(let v): try container.encode(v, forKey: key)
        case .int64(let v): try container.encode(v, forKey: key)
        case .uint64(let v): try container.encode(v, forKey: key)
        case .double(let v): try container.encode(v, forKey: key)
        case .string(let v), .objectPath(let v), .signature(let v): try container.encode(v, forKey: key)
        }
    }
}
