/// One D-Bus value of any type. Containers carry their element types so that empty arrays and
/// dictionaries keep a signature.
public enum DBusValue: Sendable, Hashable {
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
    case objectPath(ObjectPath)
    case signature(String)
    case unixFD(UnixFD)
    /// `ay`, stored compactly. Decoding always produces this form for byte arrays.
    case byteArray([UInt8])
    /// An array; `element` is the type of every element.
    case array(element: DBusType, [DBusValue])
    /// A dictionary (`a{kv}`), kept in wire order.
    case dictionary(key: DBusType, value: DBusType, [DictEntry])
    case structure([DBusValue])
    indirect case variant(DBusValue)

    public struct DictEntry: Sendable, Hashable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The complete type of this value.
    public var type: DBusType {
        switch self {
        case .byte: return .byte
        case .boolean: return .boolean
        case .int16: return .int16
        case .uint16: return .uint16
        case .int32: return .int32
        case .uint32: return .uint32
        case .int64: return .int64
        case .uint64: return .uint64
        case .double: return .double
        case .string: return .string
        case .objectPath: return .objectPath
        case .signature: return .signature
        case .unixFD: return .unixFD
        case .byteArray: return .array(.byte)
        case .array(let element, _): return .array(element)
        case .dictionary(let key, let value, _): return .dictionary(key: key, value: value)
        case .structure(let fields): return .structure(fields.map(\.type))
        case .variant: return .variant
        }
    }

    // MARK: Building common values

    /// `ay`
    public static func bytes<C: Collection>(_ bytes: C) -> DBusValue where C.Element == UInt8 {
        .byteArray(Array(bytes))
    }

    /// `as`
    public static func strings(_ strings: [String]) -> DBusValue {
        .array(element: .string, strings.map { .string($0) })
    }

    /// `ao`
    public static func objectPaths(_ paths: [ObjectPath]) -> DBusValue {
        .array(element: .objectPath, paths.map { .objectPath($0) })
    }

    /// `a{sv}`, sorted by key so that output is stable.
    public static func vardict(_ dict: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            dict.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .variant($0.value)) }
        )
    }

    /// `a{ss}`
    public static func stringDict(_ dict: [String: String]) -> DBusValue {
        .dictionary(
            key: .string, value: .string,
            dict.sorted { $0.key < $1.key }.map { DictEntry(.string($0.key), .string($0.value)) }
        )
    }

    // MARK: Reading values (nil when the type differs)

    public var byteValue: UInt8? { if case .byte(let v) = self { return v } else { return nil } }
    public var boolValue: Bool? { if case .boolean(let v) = self { return v } else { return nil } }
    public var int16Value: Int16? { if case .int16(let v) = self { return v } else { return nil } }
    public var uint16Value: UInt16? { if case .uint16(let v) = self { return v } else { return nil } }
    public var int32Value: Int32? { if case .int32(let v) = self { return v } else { return nil } }
    public var uint32Value: UInt32? { if case .uint32(let v) = self { return v } else { return nil } }
    public var int64Value: Int64? { if case .int64(let v) = self { return v } else { return nil } }
    public var uint64Value: UInt64? { if case .uint64(let v) = self { return v } else { return nil } }
    public var doubleValue: Double? { if case .double(let v) = self { return v } else { return nil } }
    /// The text of a string, object path or signature.
    public var stringValue: String? {
        switch self {
        case .string(let v), .signature(let v): return v
        case .objectPath(let p): return p.rawValue
        default: return nil
        }
    }
    public var objectPathValue: ObjectPath? { if case .objectPath(let v) = self { return v } else { return nil } }
    public var unixFDValue: UnixFD? { if case .unixFD(let v) = self { return v } else { return nil } }
    /// The value inside a variant.
    public var variantValue: DBusValue? { if case .variant(let v) = self { return v } else { return nil } }
    public var arrayValue: [DBusValue]? {
        switch self {
        case .array(_, let v): return v
        case .byteArray(let bytes): return bytes.map { .byte($0) }
        default: return nil
        }
    }
    public var structValue: [DBusValue]? { if case .structure(let v) = self { return v } else { return nil } }

    /// `ay` as bytes.
    public var bytesValue: [UInt8]? {
        switch self {
        case .byteArray(let bytes): return bytes
        case .array(.byte, let elements): return elements.compactMap(\.byteValue)
        default: return nil
        }
    }

    /// `as` as strings.
    public var stringArrayValue: [String]? {
        guard case .array(.string, let elements) = self else { return nil }
        return elements.compactMap(\.stringValue)
    }

    /// `ao` as paths.
    public var objectPathArrayValue: [ObjectPath]? {
        guard case .array(.objectPath, let elements) = self else { return nil }
        return elements.compactMap(\.objectPathValue)
    }

    /// `a{sv}` as a dictionary of the values inside the variants.
    public var vardictValue: [String: DBusValue]? {
        guard case .dictionary(.string, .variant, let entries) = self else { return nil }
        var result: [String: DBusValue] = [:]
        for entry in entries {
            guard let key = entry.key.stringValue, let value = entry.value.variantValue else { return nil }
            result[key] = value
        }
        return result
    }

    /// `a{ss}` as a dictionary.
    public var stringDictValue: [String: String]? {
        guard case .dictionary(.string, .string, let entries) = self else { return nil }
        var result: [String: String] = [:]
        for entry in entries {
            guard let key = entry.key.stringValue, let value = entry.value.stringValue else { return nil }
            result[key] = value
        }
        return result
    }
}
