/// Reads one helper datagram written by `WireWriter`; anything short or malformed throws.
struct WireReader {
    struct Malformed: Error {}

    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position == bytes.count }

    /// What is left to read.
    var remaining: [UInt8] { Array(bytes[position...]) }

    mutating func byte() throws -> UInt8 {
        guard position < bytes.count else { throw Malformed() }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func bool() throws -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw Malformed()
        }
    }

    mutating func u32() throws -> UInt32 {
        var value: UInt32 = 0
        for shift in stride(from: 0, to: 32, by: 8) { value |= UInt32(try byte()) << UInt32(shift) }
        return value
    }

    mutating func u64() throws -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { value |= UInt64(try byte()) << UInt64(shift) }
        return value
    }

    mutating func string() throws -> String {
        let count = Int(try u32())
        guard count <= bytes.count - position else { throw Malformed() }
        defer { position += count }
        return String(decoding: bytes[position..<position + count], as: UTF8.self)
    }
}
