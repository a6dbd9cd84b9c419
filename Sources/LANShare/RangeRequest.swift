/// A `Range` header as the share server takes it: one byte range (`bytes=A-B`, `bytes=A-`,
/// `bytes=-N`), or the whole file for anything else it does not serve as asked (several ranges,
/// another unit, a malformed header: RFC 9110 lets a server ignore a Range), or unsatisfiable.
public enum RangeRequest: Equatable, Sendable {
    case whole
    /// Inclusive bounds within the file.
    case bytes(first: Int64, last: Int64)
    case unsatisfiable

    public static func parse(_ header: String?, size: Int64) -> RangeRequest {
        guard let header, header.hasPrefix("bytes=") else { return .whole }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: " ")
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let from = spec[..<dash].trimmingCharacters(in: " ")
        let to = spec[spec.index(after: dash)...].trimmingCharacters(in: " ")
        if from.isEmpty {
            // The last N bytes.
            guard let count = Int64(to), count >= 0 else { return .whole }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .bytes(first: max(0, size - count), last: size - 1)
        }
        guard let first = Int64(from), first >= 0 else { return .whole }
        let last: Int64
        if to.isEmpty {
            last = size - 1
        } else {
            guard let given = Int64(to), given >= first else { return .whole }
            last = min(given, size - 1)
        }
        guard first < size else { return .unsatisfiable }
        return .bytes(first: first, last: last)
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var text = Substring(self)
        while text.first == set { text = text.dropFirst() }
        while text.last == set { text = text.dropLast() }
        return String(text)
    }
}
