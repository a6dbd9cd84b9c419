import DownloadModel

/// The auth-params of a `WWW-Authenticate` or `Proxy-Authenticate` challenge (RFC 9110,
/// 11.2): `name=token` or `name="quoted string"` (backslash escapes), separated by commas;
/// names lower-cased, the first of a repeated name kept, values cut to 1 KiB. A token68 (as
/// `Negotiate` sends) gives no parameter. Only the first challenge of the field is read.
enum AuthParameters {
    static func parse(_ text: Substring) -> [String: String] {
        var result: [String: String] = [:]
        var rest = text[...]
        func skipSpaces() { rest = rest.drop { $0 == " " || $0 == "\t" } }
        while !rest.isEmpty {
            skipSpaces()
            if rest.first == "," {
                rest = rest.dropFirst()
                continue
            }
            let name = rest.prefix { HTTPFieldRules.isToken(String($0)) }
            guard !name.isEmpty else { break }
            rest = rest.dropFirst(name.count)
            skipSpaces()
            guard rest.first == "=" else { break }
            rest = rest.dropFirst()
            skipSpaces()
            var value = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                var closed = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        closed = true
                        break
                    } else {
                        value.append(character)
                    }
                }
                guard closed else { break }
            } else {
                let token = rest.prefix { HTTPFieldRules.isToken(String($0)) }
                // `name=` with nothing, or a token68's `==`: no parameter.
                guard !token.isEmpty else { break }
                value = String(token)
                rest = rest.dropFirst(token.count)
            }
            let key = name.lowercased()
            if result[key] == nil { result[key] = String(value.prefix(1024)) }
            skipSpaces()
            // Another challenge begins (`, Basic realm=…`): its parameters are not this one's.
            guard rest.isEmpty || rest.first == "," else { break }
        }
        return result
    }
}
