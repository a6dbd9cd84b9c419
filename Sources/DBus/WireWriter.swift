/// Writes D-Bus values in the wire format (little-endian), for messages built in one pass and
/// handed to libdbus whole (`Message.signal(path:interface:name:destination:arguments:)`).
///
/// Why: libdbus appends each top-level argument through its type writer and rewrites the
/// header's signature field every time, so building a `PropertiesChanged` (`sa{sv}as`) cost about
/// 7–10 µs, a bare `(os)` about 3 µs, and loading the same bytes back (`dbus_message_demarshal`,
/// which validates every byte) about 2 µs. The checks are `Message.append`'s (`checkOwnLevel`);
/// what they leave to libdbus (nesting depth, lengths) its validation of the whole message catches.
struct WireWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    mutating func align(_ boundary: Int) {
        let padding = (boundary - bytes.count % boundary) % boundary
        if padding > 0 { bytes.append(contentsOf: repeatElement(0, count: padding)) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint16(_ value: UInt16) {
        align(2)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uint32(_ value: UInt32) {
        align(4)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uint64(_ value: UInt64) {
        align(8)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// `s` and `o`: a 32-bit length, the UTF-8 bytes, a NUL (`checkOwnLevel` refused a NUL inside).
    mutating func string(_ text: String) {
        let utf8 = text.utf8
        uint32(UInt32(truncatingIfNeeded: utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
    }

    /// `g`: an 8-bit length, the bytes, a NUL (the length is checked by libdbus's validation).
    mutating func signature(_ text: String) {
        let utf8 = text.utf8
        bytes.append(UInt8(truncatingIfNeeded: utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
    }

    /// The alignment of a value of `type` on the wire.
    static func alignment(of type: DBusType) -> Int {
        switch type {
        case .byte, .signature, .variant: return 1
        case .int16, .uint16: return 2
        case .boolean, .int32, .uint32, .string, .objectPath, .unixFD, .array: return 4
        case .int64, .uint64, .double, .dictionary, .structure: return 8
        }
    }

    /// One value. Unix file descriptors are not written here (they travel beside the message):
    /// `Unsupported` is thrown and the caller builds the message with libdbus instead.
    mutating func value(_ value: DBusValue) throws {
        try value.checkOwnLevel()
        switch value {
        case .byte(let v): byte(v)
        case .boolean(let v): uint32(v ? 1 : 0)
        case .int16(let v): uint16(UInt16(bitPattern: v))
        case .uint16(let v): uint16(v)
        case .int32(let v): uint32(UInt32(bitPattern: v))
        case .uint32(let v): uint32(v)
        case .int64(let v): uint64(UInt64(bitPattern: v))
        case .uint64(let v): uint64(v)
        case .double(let v): uint64(v.bitPattern)
        case .string(let v): string(v)
        case .objectPath(let v): string(v.rawValue)
        case .signature(let v): signature(v)
        case .unixFD: throw Unsupported()
        case .byteArray(let v):
            uint32(UInt32(v.count))
            bytes.append(contentsOf: v)
        case .array(let element, let elements):
            try array(WireWriter.alignment(of: element)) { writer in
                for item in elements { try writer.value(item) }
            }
        case .dictionary(_, _, let entries):
            try array(8) { writer in
                for entry in entries {
                    writer.align(8)
                    try writer.value(entry.key)
                    try writer.value(entry.value)
                }
            }
        case .structure(let fields):
            align(8)
            for field in fields { try self.value(field) }
        case .variant(let inner):
            signature(inner.type.signature)
            try self.value(inner)
        }
    }

    /// An array: its byte length (after the padding to the first element), the elements.
    private mutating func array(_ elementAlignment: Int, _ elements: (inout WireWriter) throws -> Void) throws {
        uint32(0)
        let lengthAt = bytes.count - 4
        align(elementAlignment)
        let start = bytes.count
        try elements(&self)
        setUInt32(UInt32(truncatingIfNeeded: bytes.count - start), at: lengthAt)
    }

    /// Overwrites the 32-bit value written at `offset` (a length known only afterwards).
    mutating func setUInt32(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { value in
            for i in 0..<4 { bytes[offset + i] = value[i] }
        }
    }

    /// Everything `other` wrote, after what this one has (`other` started at an 8-byte boundary
    /// and this one is at one, so its alignment holds).
    mutating func append(_ other: WireWriter) {
        bytes.append(contentsOf: other.bytes)
    }

    /// A value the writer leaves to libdbus (a Unix file descriptor).
    struct Unsupported: Error {}
}
