import Foundation

/// Text from callers as it goes into the log: control characters escaped (a newline in a session
/// name forges no log line) and URL credentials left out.
enum LogText {
    static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 32 || scalar.value == 127 {
                result += String(format: "\\x%02x", scalar.value)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// The URL without its userinfo, escaped.
    static func url(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.user != nil || components.password != nil else {
            return escaped(text)
        }
        components.user = nil
        components.password = nil
        return escaped(components.string ?? "(a URL)")
    }
}
