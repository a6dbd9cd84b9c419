/// Splits what apt writes to a method's standard input into messages: each ends at a blank line;
/// blank lines between messages are skipped. A message longer than `maxBytes` is refused (nil
/// and `overflowed`): apt never sends one, and a method must not grow without bound.
public struct AptMessageReader: Sendable {
    public static let maxBytes = 1 << 20

    private var pending: [UInt8] = []
    private var lines: [Substring] = []
    public private(set) var overflowed = false

    public init() {}

    /// Takes `bytes` and returns the messages they completed, in order. Whole lines are cut out
    /// of the buffer at once: apt's `601 Configuration` alone is hundreds of lines. Not generic: a
    /// generic reader is not specialised across modules, and ran through protocol witnesses.
    public mutating func take(_ bytes: ArraySlice<UInt8>) -> [AptMessage] {
        var messages: [AptMessage] = []
        var rest = bytes
        while let newline = rest.firstIndex(of: UInt8(ascii: "\n")) {
            let line: Substring
            if pending.isEmpty {
                line = Substring(String(decoding: rest[..<newline], as: UTF8.self))
            } else {
                pending.append(contentsOf: rest[..<newline])
                if pending.count > Self.maxBytes { overflowed = true }
                line = Substring(String(decoding: pending, as: UTF8.self))
                pending.removeAll(keepingCapacity: true)
            }
            rest = rest[rest.index(after: newline)...]
            if line.isEmpty || line == "\r" {
                if !lines.isEmpty, let message = AptMessage.parse(lines) { messages.append(message) }
                lines = []
            } else {
                lines.append(line)
                if lines.count > 10_000 { overflowed = true }
            }
        }
        pending.append(contentsOf: rest)
        if pending.count > Self.maxBytes { overflowed = true }
        return messages
    }

    public mutating func take(_ bytes: [UInt8]) -> [AptMessage] {
        take(bytes[...])
    }
}
