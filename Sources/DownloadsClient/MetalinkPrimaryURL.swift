/// The URL a Metalink document would make a task's own (its http(s) `<url>` of the best
/// `priority`, the first of equals), found by a plain scan: the client asks its session's proxy
/// for that URL when `Start` gives a document and no URL. Not a parser (the service parses the
/// document with libxml2; this library links no XML library): a document it cannot read yields
/// nil and the daemon's own proxy setting applies, as before.
enum MetalinkPrimaryURL {
    static func find(in document: [UInt8]) -> String? {
        let bytes = Array(document.prefix(1 << 20))
        let open = Array("<url".utf8)
        var best: (priority: Int, url: String)?
        var index = 0
        while let start = Self.index(of: open, in: bytes, from: index) {
            index = start + open.count
            // `<url>` or `<url attributes>`, not `<urls…>`.
            guard index < bytes.count,
                bytes[index] == UInt8(ascii: ">") || bytes[index] == 32 || bytes[index] == 9 || bytes[index] == 10,
                let close = bytes[index...].firstIndex(of: UInt8(ascii: ">")),
                let end = bytes[close...].firstIndex(of: UInt8(ascii: "<"))
            else { continue }
            let attributes = String(decoding: bytes[index..<close], as: UTF8.self)
            let url = String(decoding: bytes[(close + 1)..<end], as: UTF8.self)
                .split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }).joined()
            index = end
            let lower = url.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else { continue }
            let priority = Self.priority(in: attributes) ?? Int.max
            if best.map({ priority < $0.priority }) ?? true { best = (priority, Self.unescaped(url)) }
        }
        return best?.url
    }

    private static func index(of needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count else { return nil }
        var i = start
        while i + needle.count <= bytes.count {
            if bytes[i] == needle[0] && Array(bytes[i..<i + needle.count]) == needle { return i }
            i += 1
        }
        return nil
    }

    /// The value of `priority="N"` among a tag's attributes.
    private static func priority(in attributes: String) -> Int? {
        guard let name = attributes.split(separator: " ").first(where: { $0.hasPrefix("priority=") }) else {
            return nil
        }
        return Int(name.dropFirst("priority=".count).filter(\.isNumber))
    }

    /// The five XML entities a URL may hold.
    private static func unescaped(_ text: String) -> String {
        var result = text
        for (entity, character) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'"), ("&amp;", "&")] {
            result = result.split(separator: entity, omittingEmptySubsequences: false).joined(separator: character)
        }
        return result
    }
}
