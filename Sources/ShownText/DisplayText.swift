/// Text a server or a caller chose (a file name, a URL, a message), made safe for where a person
/// sees it. One place decides what is hidden: control characters (C0, DEL, C1: a terminal
/// obeys CSI and OSC sequences), format characters (Unicode category Cf: bidi overrides such as
/// U+202E turn "invoice\u{202E}fdp.exe" into "invoiceexe.pdf"; zero-width characters) and line
/// and paragraph separators.
///
/// - `escaped`: each hidden character as `\xNN` or `\u{NNNN}`, and `\` as `\\`, so nothing is
///   lost or ambiguous (terminals, logs; the spirit of `ls -b`).
/// - `quoted`: `escaped`, shortened to a limit, for a server's value inside a message.
/// - `markup`: `escaped`, then `&`, `<` and `>` as entities: a notification body, which the
///   Desktop Notifications specification lets servers render as markup.
public enum DisplayText {
    /// Whether `scalar` is hidden or acts on the display instead of showing.
    public static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    public static func escaped(_ text: String) -> String {
        // Printable ASCII without a backslash (most names and URLs) is shown as it is: no scalar
        // of it is hidden, and its Unicode properties need not be looked up (a log line per task).
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                result += "\\\\"
            } else if isHidden(scalar) {
                result +=
                    scalar.value < 0x100
                    ? "\\x" + hex(scalar.value, digits: 2) : "\\u{" + hex(scalar.value, digits: 4) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// `escaped(text)` cut to about `limit` characters, with `…` where it was cut.
    public static func quoted(_ text: String, limit: Int = 120) -> String {
        let shown = escaped(text)
        guard shown.count > limit else { return shown }
        return String(shown.prefix(limit)) + "…"
    }

    /// `escaped(text)` with `&`, `<` and `>` as entities (a notification body).
    public static func markup(_ text: String) -> String {
        var result = ""
        for character in escaped(text) {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            default: result.append(character)
            }
        }
        return result
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: false)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
