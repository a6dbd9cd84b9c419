/// What apt's `601 Configuration` tells the method: `Acquire::downloads::LanPeers`, `::Share` and
/// `::Background` (false unless set), and the administrator's proxy for apt
/// (`Acquire::http::Proxy`, `Acquire::https::Proxy`; `DIRECT` is none), and the user apt's
/// methods run as (`APT::Sandbox::User`, `_apt` in apt's defaults; empty or `root`: none).
public struct AptMethodSettings: Sendable, Hashable {
    public var sandboxUser: String?
    public var lanPeers = false
    public var share = false
    public var background = false
    public var httpProxy: String?
    public var httpsProxy: String?

    public init() {}

    /// From a `601 Configuration`'s `Config-Item: NAME=VALUE` fields (apt quotes `=`, `"` and line
    /// breaks in them as `%XX`).
    public init(_ message: AptMessage) {
        for item in message.values("Config-Item") {
            guard let equals = item.firstIndex(of: "=") else { continue }
            let name = Self.dequoted(String(item[..<equals])).lowercased()
            let value = Self.dequoted(String(item[item.index(after: equals)...]))
            switch name {
            case "acquire::downloads::lanpeers": lanPeers = Self.bool(value)
            case "acquire::downloads::share": share = Self.bool(value)
            case "acquire::downloads::background": background = Self.bool(value)
            case "acquire::http::proxy": httpProxy = value.isEmpty ? nil : value
            case "acquire::https::proxy": httpsProxy = value.isEmpty ? nil : value
            case "apt::sandbox::user": sandboxUser = value.isEmpty || value == "root" ? nil : value
            default: break
            }
        }
    }

    /// The proxy option for `url`: the administrator's for its scheme (`direct://` for apt's
    /// `DIRECT`), nil when apt names none (the service's own environment then decides).
    public func proxy(for url: String) -> String? {
        let chosen = url.lowercased().hasPrefix("https://") ? (httpsProxy ?? httpProxy) : httpProxy
        guard let chosen else { return nil }
        return chosen.uppercased() == "DIRECT" ? "direct://" : chosen
    }

    /// apt's booleans: true, yes, with, on, enable, 1.
    static func bool(_ text: String) -> Bool {
        ["true", "yes", "with", "on", "enable", "1"].contains(text.lowercased())
    }

    /// `%XX` undone, as apt's `DeQuoteString`.
    static func dequoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.first {
            input = input.dropFirst()
            if byte == UInt8(ascii: "%"), input.count >= 2,
                let value = UInt8(String(decoding: input.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                input = input.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
