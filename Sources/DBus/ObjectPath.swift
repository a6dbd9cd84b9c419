/// A validated D-Bus object path.
public struct ObjectPath: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public init(_ rawValue: String) throws {
        guard ObjectPath.isValid(rawValue) else {
            throw BusError.invalidArgs("'\(rawValue)' is not a valid D-Bus object path")
        }
        self.rawValue = rawValue
    }

    /// For literals in code only; an invalid literal is a programming error caught by the tests.
    public init(stringLiteral value: String) {
        precondition(ObjectPath.isValid(value), "invalid object path literal \(value)")
        self.rawValue = value
    }

    public static let root = ObjectPath(unchecked: "/")

    init(unchecked: String) { self.rawValue = unchecked }

    public var description: String { rawValue }

    public static func < (lhs: ObjectPath, rhs: ObjectPath) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `/a/b` + `c` → `/a/b/c`. The element must match `[A-Za-z0-9_]+`.
    public func appending(_ element: String) throws -> ObjectPath {
        try ObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// Whether `other` lies strictly below this path.
    public func isAncestor(of other: ObjectPath) -> Bool {
        if rawValue == "/" { return other.rawValue != "/" }
        return other.rawValue.hasPrefix(rawValue + "/")
    }

    /// The path's elements: `/a/b` → `["a", "b"]`.
    public var elements: [Substring] {
        rawValue.split(separator: "/")
    }

    public static func isValid(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousSlash = true
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
                continue
            }
            previousSlash = false
            if !DBusNames.isElementByte(byte) { return false }
        }
        return true
    }
}
