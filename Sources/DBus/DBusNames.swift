/// The character rules shared by interface, error and member names and object path elements.
enum DBusNames {
    /// `[A-Za-z0-9_]`
    static func isElementByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "_")
    }

    /// One element of a dotted name, or a member name: non-empty, `[A-Za-z0-9_]`, no leading digit.
    static func isValidElement<C: Collection>(_ bytes: C) -> Bool where C.Element == UInt8 {
        guard let first = bytes.first, !(first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) else { return false }
        return bytes.allSatisfy(isElementByte)
    }

    /// An interface or error name: at most 255 bytes, two or more valid elements joined by
    /// dots. One pass over the bytes, no allocation (every signal sent checks its interface).
    static func isValidDottedName(_ name: String) -> Bool {
        var count = 0
        var elements = 0
        var elementStart = true
        for byte in name.utf8 {
            count += 1
            if byte == UInt8(ascii: ".") {
                guard !elementStart else { return false }
                elementStart = true
                continue
            }
            guard isElementByte(byte) else { return false }
            if elementStart {
                guard !(byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) else { return false }
                elements += 1
                elementStart = false
            }
        }
        return count <= 255 && !elementStart && elements >= 2
    }
}
