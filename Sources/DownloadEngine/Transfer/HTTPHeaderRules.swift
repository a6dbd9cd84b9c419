import DownloadModel
import Foundation
import TerminalOutput
import NIOHTTP1
import ShownText

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
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]), first >= 0, last >= first
        else {
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
            let modified = HTTPDate.date(lastModified), let now = HTTPDate.date(date),
            now.timeIntervalSince(modified) >= 1
        else { return nil }
        return lastModified
    }

    /// `Retry-After` as seconds (delta-seconds or an HTTP-date), capped at `cap`.
    public static func retryAfter(_ headers: HTTPHeaders, now: Date = Date(), cap: Double) -> Double? {
        guard let value = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Double(value), seconds >= 0 { return min(seconds, cap) }
        if let date = HTTPDate.date(value) { return min(max(0, date.timeIntervalSince(now)), cap) }
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

    /// The longest name `sanitize` keeps, in bytes: NAME_MAX (255) less the ` (999)` the
    /// finaliser may add to find a free name.
    public static let maximumNameBytes = 255 - " (999)".utf8.count

    /// A file name from a server (Content-Disposition or the URL's last segment) made safe to
    /// create and to show: every character `DisplayText` hides (C0, DEL, C1, bidi and other
    /// format characters, line separators), `/` and `\\` become `_`; no leading dots or spaces;
    /// at most `maximumNameBytes` bytes, cut from the stem so the extension stays. Nil if
    /// nothing usable is left.
    public static func sanitize(_ name: String) -> String? {
        var cleaned = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { scalar -> Unicode.Scalar in
                    scalar == "/" || scalar == "\\" || DisplayText.isHidden(scalar) ? "_" : scalar
                }))
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        guard !cleaned.isEmpty, cleaned != "_" || name == "_" else { return nil }
        return shortened(cleaned, to: maximumNameBytes)
    }

    /// `name` within `limit` UTF-8 bytes, whole characters only, keeping an extension of up to
    /// 32 bytes (`.tar.gz` counts as `.gz`).
    static func shortened(_ name: String, to limit: Int) -> String {
        guard name.utf8.count > limit else { return name }
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        var ext = dot.map { String(name[$0...]) } ?? ""
        if ext.utf8.count > 32 || ext.contains(" ") { ext = "" }
        var stem = ext.isEmpty ? name : String(name[..<name.index(name.endIndex, offsetBy: -ext.count)])
        while stem.utf8.count + ext.utf8.count > limit, !stem.isEmpty { stem.removeLast() }
        return stem.trimmingCharacters(in: .whitespaces) + ext
    }

    /// The first challenge of a `WWW-Authenticate` (or `Proxy-Authenticate`) field (RFC 9110
    /// §11.6.1): its scheme as written, its `realm` ("" when none) and its parameters
    /// (`AuthParameters`: a Digest's nonce, opaque, qop, algorithm); nil when the field is absent
    /// or names no scheme.
    public static func authChallenge(
        _ headers: HTTPHeaders, field: String = "www-authenticate"
    ) -> (
        scheme: String, realm: String, parameters: [String: String]
    )? {
        guard let value = headers.first(name: field)?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
            return nil
        }
        let scheme = String(value.prefix { !$0.isWhitespace && $0 != "," })
        guard !scheme.isEmpty, HTTPFieldRules.isToken(scheme) else { return nil }
        let parameters = AuthParameters.parse(value.dropFirst(scheme.count))
        return (scheme, String((parameters["realm"] ?? "").prefix(200)), parameters)
    }
}
