import DownloadModel
import Foundation
import NIOHTTP1

/// Metalink/HTTP (RFC 6249) in a response's head: `Link: <URL>; rel=duplicate` names mirrors of
/// the file, `Digest: SHA-256=<base64>` (RFC 3230; `Repr-Digest: sha-256=:<base64>:` of RFC 9530
/// too) its whole digest. Pure, tested without I/O.
enum MetalinkHeaders {
    /// The mirrors a head names, resolved against `base`, http(s) only, in the order given
    /// (RFC 6249's `pri` ordering: lower first; none last), without `base` itself.
    static func mirrors(in headers: HTTPHeaders, base: String) -> [String] {
        var found: [(url: String, priority: Int)] = []
        for value in headers[canonicalForm: "link"] {
            guard let link = parse(String(value)), link.relations.contains("duplicate") else { continue }
            guard let resolved = URL(string: link.target, relativeTo: URL(string: base))?.absoluteURL,
                Source(resolved) != nil
            else { continue }
            let text = resolved.absoluteString
            guard text != base, !found.contains(where: { $0.url == text }) else { continue }
            found.append((text, link.priority ?? Int.max))
        }
        return found.enumerated().sorted { a, b in
            a.element.priority != b.element.priority ? a.element.priority < b.element.priority : a.offset < b.offset
        }.map(\.element.url)
    }

    /// The strongest whole-file digest a head gives (`Checksum.Algorithm.strongestFirst`), if any.
    static func checksum(in headers: HTTPHeaders) -> Checksum? {
        var found: [Checksum.Algorithm: String] = [:]
        // RFC 3230: `SHA-256=base64`, comma-separated.
        for value in headers[canonicalForm: "digest"] {
            guard let equals = value.firstIndex(of: "=") else { continue }
            let name = value[..<equals].trimmingCharacters(in: .whitespaces)
            if let algorithm = Checksum.Algorithm(ianaName: name) {
                found[algorithm] = String(value[value.index(after: equals)...]).trimmingCharacters(in: .whitespaces)
            }
        }
        // RFC 9530: `sha-256=:base64:`.
        for value in headers[canonicalForm: "repr-digest"] {
            guard let equals = value.firstIndex(of: "=") else { continue }
            let name = value[..<equals].trimmingCharacters(in: .whitespaces)
            let encoded = value[value.index(after: equals)...].trimmingCharacters(in: CharacterSet(charactersIn: ": "))
            if let algorithm = Checksum.Algorithm(ianaName: name) { found[algorithm] = encoded }
        }
        for algorithm in Checksum.Algorithm.strongestFirst {
            guard let encoded = found[algorithm], let bytes = Data(base64Encoded: encoded) else { continue }
            let hex = bytes.map { String(format: "%02x", $0) }.joined()
            if let checksum = try? Checksum(algorithm, hex: hex) { return checksum }
        }
        return nil
    }

    private struct Link {
        var target: String
        var relations: Set<String>
        var priority: Int?
    }

    /// One link-value: `<target>; rel=duplicate; pri=1` (rel may be quoted and hold several).
    private static func parse(_ text: String) -> Link? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("<"), let close = trimmed.firstIndex(of: ">") else { return nil }
        var link = Link(target: String(trimmed[trimmed.index(after: trimmed.startIndex)..<close]), relations: [])
        for parameter in trimmed[trimmed.index(after: close)...].split(separator: ";") {
            let parts = parameter.split(separator: "=", maxSplits: 1).map {
                $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
            guard parts.count == 2 else { continue }
            switch parts[0].lowercased() {
            case "rel": link.relations = Set(parts[1].lowercased().split(separator: " ").map(String.init))
            case "pri": link.priority = Int(parts[1])
            default: break
            }
        }
        return link
    }
}
