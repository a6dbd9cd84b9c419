/// Lowercase hexadecimal, as digests are written (checksums, piece hashes, resume data's MAC).
public enum Hex {
    /// `bytes` as two lowercase digits each.
    public static func string<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of lowercase hex digits; nil for an odd count or anything else.
    public static func bytes<C: Collection>(_ text: C) -> [UInt8]? where C.Element == UInt8 {
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var high: UInt8?
        for character in text {
            let nibble: UInt8
            switch character {
            case 48...57: nibble = character - 48
            case 97...102: nibble = character - 87
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
