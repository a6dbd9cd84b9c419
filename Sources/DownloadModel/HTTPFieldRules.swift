import ShownText

/// What RFC 9110 allows in a field (§5.1, §5.5) and a media type (§8.3.1), as pure checks of
/// what a caller gives (`headers`, `content_type`) before anything goes on the wire or in a log.
public enum HTTPFieldRules {
    /// The request header that carries a request's tag from its sender to its connection's
    /// handler, which takes it out of the head (`ConnectionWatch`): never a caller's.
    public static let serviceTagHeader = "x-org-example-downloads-transaction"

    /// Headers a caller may not set, in an option, an update or an app's answer: the service
    /// owns them (ranges, validators, the connection, the body's framing, its own tag).
    public static let reservedHeaders: Set<String> = [
        "range", "if-range", "accept-encoding", "host", "content-length", "transfer-encoding", "connection",
        "expect", "te", "upgrade", "keep-alive", "proxy-connection", serviceTagHeader,
        // The options `if_modified_since` and `if_none_match`: sent only from the file's start.
        "if-modified-since", "if-none-match",
    ]

    /// The one rule for a header a caller gives (`headers` of Start, of Update, of an answer to
    /// `HandleChallenge`): a token name, a value of visible characters, spaces and tabs, and not
    /// one of `reservedHeaders`.
    public static func checkCallerHeader(name: String, value: String) throws(DownloadError) {
        guard isToken(name) else {
            throw .invalidArgument("header name '\(DisplayText.quoted(name, limit: 60))' is not a valid HTTP token")
        }
        guard isFieldValue(value) else {
            throw .invalidArgument(
                "header '\(name)' contains a control character (CR, LF, NUL, VT, C1, U+2028…): RFC 9110 allows only visible characters, spaces and tabs"
            )
        }
        guard !reservedHeaders.contains(name.lowercased()) else {
            throw .invalidArgument("header '\(name)' is set by the service and cannot be given")
        }
    }
    /// `tchar`: `!#$%&'*+-.^_`|~`, digits and letters.
    static let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)

    /// `token = 1*tchar` (a field name, a media type's parts, a parameter's name).
    public static func isToken(_ text: some StringProtocol) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || tokenPunctuation.contains(byte)
            }
    }

    /// A field value: visible characters, spaces and horizontal tabs (§5.5 excludes every other
    /// control). Beyond ASCII (`obs-text`), text is allowed, but not the C1 controls nor the line
    /// and paragraph separators (U+2028, U+2029), which end a line in logs and terminals.
    public static func isFieldValue(_ text: some StringProtocol) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            switch scalar.value {
            case 0x09, 0x20...0x7E: return true
            case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: return false
            default: return true
            }
        }
    }

    /// `type "/" subtype *( OWS ";" OWS parameter )`, `parameter = token "=" ( token / quoted-string )`.
    public static func isMediaType(_ text: String) -> Bool {
        var scanner = Scanner(Array(text.unicodeScalars))
        guard scanner.token(), scanner.take("/"), scanner.token() else { return false }
        while true {
            scanner.skipWhitespace()
            if scanner.atEnd { return true }
            guard scanner.take(";") else { return false }
            scanner.skipWhitespace()
            guard scanner.token(), scanner.take("=") else { return false }
            guard scanner.token() || scanner.quotedString() else { return false }
        }
    }

    /// Reads a media type a piece at a time.
    private struct Scanner {
        let scalars: [Unicode.Scalar]
        var index = 0

        init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

        var atEnd: Bool { index == scalars.count }

        mutating func take(_ character: Unicode.Scalar) -> Bool {
            guard !atEnd, scalars[index] == character else { return false }
            index += 1
            return true
        }

        mutating func skipWhitespace() {
            while !atEnd, scalars[index] == " " || scalars[index] == "\t" { index += 1 }
        }

        /// One or more `tchar`.
        mutating func token() -> Bool {
            let start = index
            while !atEnd, scalars[index].isASCII, HTTPFieldRules.isToken(String(scalars[index])) { index += 1 }
            return index > start
        }

        /// `DQUOTE *( qdtext / quoted-pair ) DQUOTE`, no control but HTAB inside.
        mutating func quotedString() -> Bool {
            guard take("\"") else { return false }
            while !atEnd {
                let scalar = scalars[index]
                index += 1
                if scalar == "\"" { return true }
                guard HTTPFieldRules.isFieldValue(String(scalar)) else { return false }
                if scalar == "\\" {
                    guard !atEnd, HTTPFieldRules.isFieldValue(String(scalars[index])) else { return false }
                    index += 1
                }
            }
            return false
        }
    }
}
