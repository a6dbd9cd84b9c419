/// One message of apt's method protocol (apt's doc/method.dbk): a status line, `CODE SUMMARY`,
/// then `Name: value` fields, ended by a blank line. apt sends the 6xx codes (`600 URI Acquire`,
/// `601 Configuration`); a method sends the others (`100 Capabilities`, `200 URI Start`, `201 URI
/// Done`, `400 URI Failure`, `102 Status`…).
public struct AptMessage: Sendable, Hashable {
    public var code: Int
    public var summary: String
    /// In order; a name may repeat (`Config-Item`).
    public var fields: [Field]

    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(_ code: Int, _ summary: String, _ fields: [Field] = []) {
        self.code = code
        self.summary = summary
        self.fields = fields
    }

    /// The first field named `name` (case-insensitive, as apt's `LookupTag`).
    public subscript(_ name: String) -> String? {
        let wanted = name.lowercased()
        return fields.first { $0.name.lowercased() == wanted }?.value
    }

    /// Every value of the fields named `name`.
    public func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return fields.filter { $0.name.lowercased() == wanted }.map(\.value)
    }

    /// The message as it goes on the wire. A value's line breaks become spaces: a server's text
    /// (a reason phrase, a file name) can never end a field or the message early.
    public var text: String {
        var out = "\(code) \(Self.oneLine(summary))\n"
        for field in fields { out += "\(Self.oneLine(field.name)): \(Self.oneLine(field.value))\n" }
        return out + "\n"
    }

    /// Parses one message's lines (without the blank line that ends it); nil when the first is no
    /// `CODE SUMMARY` line. A line without `:` is skipped, as apt does.
    public static func parse(_ lines: [Substring]) -> AptMessage? {
        guard let first = lines.first else { return nil }
        let status = first.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        guard let code = Int(status[0]), (100...999).contains(code) else { return nil }
        var message = AptMessage(code, status.count > 1 ? String(status[1]) : "")
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingSpaces
            let value = line[line.index(after: colon)...].trimmingSpaces
            message.fields.append(Field(String(name), String(value)))
        }
        return message
    }

    private static func oneLine(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }) else { return text }
        return String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" || last == "\r" { text = text.dropLast() }
        return text
    }
}
