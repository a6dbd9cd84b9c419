/// A complete D-Bus type, parsed from (and rendered back to) a type signature.
public indirect enum DBusType: Hashable, Sendable, CustomStringConvertible {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double
    case string, objectPath, signature, unixFD
    case array(DBusType)
    case dictionary(key: DBusType, value: DBusType)
    case structure([DBusType])
    case variant

    /// The signature of this single complete type, e.g. `a{sv}`.
    public var signature: String {
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
        case .unixFD: return "h"
        case .variant: return "v"
        case .array(let element): return "a" + element.signature
        case .dictionary(let key, let value): return "a{" + key.signature + value.signature + "}"
        case .structure(let fields): return "(" + fields.map(\.signature).joined() + ")"
        }
    }

    public var description: String { signature }

    /// Basic types are the ones allowed as dictionary keys.
    public var isBasic: Bool {
        switch self {
        case .array, .dictionary, .structure, .variant: return false
        default: return true
        }
    }

    /// Parses a signature made of exactly one complete type.
    public init(_ signature: String) throws {
        let types = try DBusType.parse(signature)
        guard types.count == 1 else {
            throw BusError.invalidSignature("'\(signature)' is not a single complete type")
        }
        self = types[0]
    }

    /// The signature of a sequence of types (a message body).
    public static func signature(of types: [DBusType]) -> String {
        types.map(\.signature).joined()
    }

    /// Parses a signature made of zero or more complete types, with the limits of the
    /// D-Bus specification (255 bytes, 32 levels of arrays and of structs).
    public static func parse(_ signature: String) throws -> [DBusType] {
        let bytes = Array(signature.utf8)
        guard bytes.count <= 255 else {
            throw BusError.invalidSignature("signature is longer than 255 bytes")
        }
        var parser = SignatureParser(bytes: bytes, text: signature)
        var types: [DBusType] = []
        while !parser.atEnd {
            types.append(try parser.parseSingle(arrayDepth: 0, structDepth: 0))
        }
        return types
    }
}

private struct SignatureParser {
    let bytes: [UInt8]
    let text: String
    var index = 0

    var atEnd: Bool { index >= bytes.count }

    func failure(_ why: String) -> BusError {
        BusError.invalidSignature("invalid signature '\(text)': \(why)")
    }

    mutating func parseSingle(arrayDepth: Int, structDepth: Int) throws -> DBusType {
        guard index < bytes.count else { throw failure("a type is missing at the end") }
        let code = bytes[index]
        index += 1
        switch code {
        case UInt8(ascii: "y"): return .byte
        case UInt8(ascii: "b"): return .boolean
        case UInt8(ascii: "n"): return .int16
        case UInt8(ascii: "q"): return .uint16
        case UInt8(ascii: "i"): return .int32
        case UInt8(ascii: "u"): return .uint32
        case UInt8(ascii: "x"): return .int64
        case UInt8(ascii: "t"): return .uint64
        case UInt8(ascii: "d"): return .double
        case UInt8(ascii: "s"): return .string
        case UInt8(ascii: "o"): return .objectPath
        case UInt8(ascii: "g"): return .signature
        case UInt8(ascii: "h"): return .unixFD
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            guard arrayDepth < 32 else { throw failure("arrays nested deeper than 32") }
            if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                index += 1
                let key = try parseSingle(arrayDepth: arrayDepth + 1, structDepth: structDepth + 1)
                guard key.isBasic else { throw failure("dictionary keys must be basic types") }
                let value = try parseSingle(arrayDepth: arrayDepth + 1, structDepth: structDepth + 1)
                guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
                    throw failure("a dictionary entry must hold exactly one key and one value")
                }
                index += 1
                return .dictionary(key: key, value: value)
            }
            return .array(try parseSingle(arrayDepth: arrayDepth + 1, structDepth: structDepth))
        case UInt8(ascii: "("):
            guard structDepth < 32 else { throw failure("structs nested deeper than 32") }
            var fields: [DBusType] = []
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                fields.append(try parseSingle(arrayDepth: arrayDepth, structDepth: structDepth + 1))
            }
            guard index < bytes.count else { throw failure("unclosed struct") }
            index += 1
            guard !fields.isEmpty else { throw failure("empty struct") }
            return .structure(fields)
        case UInt8(ascii: "{"):
            throw failure("dictionary entry outside an array")
        default:
            throw failure("unknown type code '\(Character(Unicode.Scalar(code)))'")
        }
    }
}
