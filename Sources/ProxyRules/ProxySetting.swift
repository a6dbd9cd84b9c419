/// Where a request goes first: straight to the server, or through a proxy. Parsed from the text
/// a caller gives (`proxy` option) or an environment variable holds, with curl's rules:
///
/// - `http://[user:password@]host[:port]`: an HTTP proxy. Every request is tunnelled with
///   `CONNECT host:port` (AsyncHTTPClient's one proxy mode; TLS runs inside the tunnel, to the
///   server), with `Proxy-Authorization: Basic` when credentials are given. The user name and
///   password are percent-decoded, as curl does.
/// - `socks5://host[:port]`: SOCKS5, the server's name resolved here and its address sent.
/// - `socks5h://host[:port]`: SOCKS5, the name sent to the proxy, which resolves it.
/// - `direct://`: no proxy (what the desktop's proxy resolver answers for "none").
///
/// A bare `host:port` is an HTTP proxy, as in curl and in most `http_proxy` values. The port
/// defaults to 1080, curl's default. `https://` proxies (TLS to the proxy itself) are refused
/// with a reason: AsyncHTTPClient cannot speak TLS to a proxy.
///
/// Credentials are secrets: `description` (for messages and logs) never holds them; `text` (for
/// the store and sealed resume data) does.
public enum ProxySetting: Sendable, Hashable, CustomStringConvertible {
    case direct
    case http(host: String, port: Int, credentials: Credentials?)
    /// `resolvesNames`: socks5h (the proxy resolves the server's name).
    case socks5(host: String, port: Int, resolvesNames: Bool)

    public struct Credentials: Sendable, Hashable {
        public let user: String
        public let password: String

        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }
    }

    public static let defaultPort = 1080

    /// Why a text is not a proxy URL (never echoing a password).
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Parses a proxy URL; `Invalid` with a reason if it is not one.
    public static func parse(_ text: String) throws(Invalid) -> ProxySetting {
        func invalid(_ why: String) -> Invalid {
            Invalid(
                message:
                    "proxy must be http://[user:password@]host:port, socks5://host:port, socks5h://host:port or direct://: \(why)"
            )
        }
        guard !URLCharacters.containSpaceOrControl(text) else {
            throw invalid("it contains spaces or control characters")
        }
        var rest = Substring(text)
        var scheme = "http"
        if let separator = rest.firstRange(of: "://") {
            scheme = rest[..<separator.lowerBound].lowercased()
            rest = rest[separator.upperBound...]
        }
        if scheme == "direct" {
            guard rest.isEmpty else { throw invalid("direct:// takes nothing after it") }
            return .direct
        }
        guard ["http", "socks5", "socks5h"].contains(scheme) else {
            throw invalid(
                scheme == "https"
                    ? "a TLS connection to the proxy itself (https://) is not supported" : "unknown scheme '\(scheme)'")
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
            throw invalid("a proxy URL has no path")
        }
        var credentials: Credentials?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard scheme == "http" else { throw invalid("SOCKS5 with a user name is not supported") }
            let parts = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = percentDecoded(parts[0]), let password = percentDecoded(parts.count > 1 ? parts[1] : "")
            else {
                throw invalid("the user name or password has a malformed %-escape")
            }
            guard !user.isEmpty else { throw invalid("the user name is empty") }
            credentials = Credentials(user: user, password: password)
        }
        let (host, port) = try hostAndPort(rest, invalid: invalid)
        if scheme == "http" { return .http(host: host, port: port, credentials: credentials) }
        return .socks5(host: host, port: port, resolvesNames: scheme == "socks5h")
    }

    /// `host[:port]`, `[v6][:port]`; the host as a connect call takes it (no brackets).
    private static func hostAndPort(_ text: Substring, invalid: (String) -> Invalid) throws(Invalid) -> (String, Int) {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw invalid("an IPv6 address without its ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard NetworkRange.parse(String(host)) != nil else { throw invalid("'\(host)' is not an IPv6 address") }
        } else {
            let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            portText = parts.count > 1 ? parts[1] : nil
            guard !host.isEmpty,
                host.utf8.allSatisfy({ byte in
                    (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte)
                        || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                })
            else {
                throw invalid("'\(host)' is not a host name or address")
            }
        }
        var port = defaultPort
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value),
                portText.utf8.allSatisfy({ (48...57).contains($0) })
            else {
                throw invalid("the port must be 1 to 65535")
            }
            port = value
        }
        return (host.lowercased(), port)
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: return byte - 48
        case 65...70: return byte - 55
        case 97...102: return byte - 87
        default: return nil
        }
    }

    /// The proxy for messages and logs: never the credentials.
    public var description: String {
        switch self {
        case .direct: return "direct://"
        case .http(let host, let port, _): return "http://\(Self.hostText(host)):\(port)"
        case .socks5(let host, let port, let resolvesNames):
            return "\(resolvesNames ? "socks5h" : "socks5")://\(Self.hostText(host)):\(port)"
        }
    }

    /// The whole setting, credentials included (percent-encoded): what the store and sealed
    /// resume data keep, and what `parse` reads back to the same value.
    public var text: String {
        guard case .http(let host, let port, let credentials?) = self else { return description }
        return
            "http://\(Self.percentEncoded(credentials.user)):\(Self.percentEncoded(credentials.password))@\(Self.hostText(host)):\(port)"
    }

    public var host: String? {
        switch self {
        case .direct: return nil
        case .http(let host, _, _), .socks5(let host, _, _): return host
        }
    }

    public var hasCredentials: Bool {
        if case .http(_, _, _?) = self { return true }
        return false
    }

    public var port: Int? {
        switch self {
        case .direct: return nil
        case .http(_, let port, _), .socks5(_, let port, _): return port
        }
    }

    private static func hostText(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    private static func percentEncoded(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            let unreserved =
                (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "~")
            if unreserved {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let digits = Array("0123456789ABCDEF".utf8)
                result += "%" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return result
    }
}
