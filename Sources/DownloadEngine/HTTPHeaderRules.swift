import Foundation
import NIOHTTP1

/// The HTTP rules the transfer applies, as pure functions (tested without I/O).
public enum HTTPHeaderRules {
    /// `Content-Range: bytes first-last/complete` (complete may be `*`), or `bytes */complete`.
    public struct ContentRange: Hashable, Sendable {
        public var first: Int64?
        public var last: Int64?
        public var complete: Int64?
    }

    public static func parseContentRange(_ value: String) -> ContentRange? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        var range = ContentRange()
        if parts[1] != "*" {
            guard let complete = Int64(parts[1]), complete >= 0 else { return nil }
            range.complete = complete
        }
        if parts[0] == "*" {
            guard range.complete != nil else { return nil }
            return range
        }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]), first >= 0, last >= first else {
            return nil
        }
        if let complete = range.complete, last >= complete { return nil }
        range.first = first
        range.last = last
        return range
    }

    /// A validator usable in `If-Range`: a strong ETag, or a Last-Modified that RFC 9110
    /// §8.8.2.2 lets us treat as strong (at least one second before the response's Date).
    public static func strongValidator(_ headers: HTTPHeaders) -> String? {
        if let etag = headers.first(name: "etag")?.trimmingCharacters(in: .whitespaces), !etag.isEmpty {
            return etag.hasPrefix("W/") ? nil : etag
        }
        guard let lastModified = headers.first(name: "last-modified"), let date = headers.first(name: "date"),
              let modified = parseHTTPDate(lastModified), let now = parseHTTPDate(date),
              now.timeIntervalSince(modified) >= 1
        else { return nil }
        return lastModified
    }

    /// `Retry-After` as seconds (delta-seconds or an HTTP-date), capped at `cap`.
    public static func retryAfter(_ headers: HTTPHeaders, now: Date = Date(), cap: Double) -> Double? {
        guard let value = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Double(value), seconds >= 0 { return min(seconds, cap) }
        if let date = parseHTTPDate(value) { return min(max(0, date.timeIntervalSince(now)), cap) }
        return nil
    }

    public static func parseHTTPDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    /// The file name a server suggests (`filename*=UTF-8''…` preferred over `filename=`), sanitised.
    public static func fileName(contentDisposition: String?, url: String) -> String {
        if let header = contentDisposition {
            var plain: String?
            var extended: String?
            for parameter in header.split(separator: ";").dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard pair.count == 2 else { continue }
                switch pair[0].lowercased() {
                case "filename*":
                    let value = pair[1]
                    if let quote = value.range(of: "''") {
                        extended = String(value[quote.upperBound...]).removingPercentEncoding
                    }
                case "filename":
                    var value = pair[1]
                    if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                        value = String(value.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
                    }
                    plain = value
                default: break
                }
            }
            if let name = sanitize(extended ?? plain ?? "") { return name }
        }
        let path = URL(string: url)?.path ?? ""
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        return sanitize(last.removingPercentEncoding ?? last) ?? "download"
    }

    /// No `/` or `\`, no `..`, no control characters, not hidden, at most 255 bytes; nil if
    /// nothing usable is left.
    public static func sanitize(_ name: String) -> String? {
        var cleaned = String(name.unicodeScalars.map { scalar -> Character in
            if scalar == "/" || scalar == "\\" || scalar.value < 32 || scalar.value == 127 { return "_" }
            return Character(scalar)
        })
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        while cleaned.utf8.count > 255 { cleaned.removeLast() }
        guard !cleaned.isEmpty, cleaned != "_" || name == "_" else { return nil }
        return cleaned
    }
}
