/// The hosts that bypass a proxy, from `no_proxy`/`NO_PROXY` with curl's rules: entries separated
/// by commas (spaces around them ignored); `*` alone matches every host; a host name matches
/// itself and every name below it (`example.com` and `.example.com` both match `example.com` and
/// `www.example.com`, never `badexample.com`), case-insensitively; an IP address matches itself
/// and a CIDR range (`10.0.0.0/8`, `fd00::/8`) the addresses in it (as curl 7.86 and later).
/// An entry may end in `:port` (`[v6]:port` for IPv6) to match that port only, which curl does not
/// do and Go's and Python's readers do.
public struct NoProxyList: Sendable, Hashable {
    enum Entry: Sendable, Hashable {
        case name(String, port: Int?)
        case network(NetworkRange, port: Int?)
    }

    let matchesEverything: Bool
    let entries: [Entry]

    public init(_ text: String) {
        var everything = false
        var entries: [Entry] = []
        for raw in text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            var item = Substring(raw)
            if item == "*" {
                everything = true
                continue
            }
            var port: Int?
            if item.hasPrefix("[") {
                // [v6] or [v6]:port
                guard let close = item.firstIndex(of: "]") else { continue }
                let after = item[item.index(after: close)...]
                if after.hasPrefix(":"), let value = Int(after.dropFirst()) { port = value }
                item = item[item.index(after: item.startIndex)..<close]
            } else if item.filter({ $0 == ":" }).count == 1, let colon = item.firstIndex(of: ":"),
                let value = Int(item[item.index(after: colon)...])
            {
                // name:port or v4:port (an IPv6 address has more than one colon)
                port = value
                item = item[..<colon]
            }
            if let range = NetworkRange(String(item)) {
                entries.append(.network(range, port: port))
            } else {
                while item.hasPrefix(".") { item = item.dropFirst() }
                while item.hasSuffix(".") { item = item.dropLast() }
                if !item.isEmpty { entries.append(.name(item.lowercased(), port: port)) }
            }
        }
        matchesEverything = everything
        self.entries = entries
    }

    public var isEmpty: Bool { !matchesEverything && entries.isEmpty }

    /// Whether a request to `host` (a name, or an address with or without brackets) on `port`
    /// goes direct.
    public func matches(host: String, port: Int) -> Bool {
        if matchesEverything { return true }
        var host = host.lowercased()
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        while host.hasSuffix(".") { host.removeLast() }
        let isAddress = NetworkRange.parse(host) != nil
        for entry in entries {
            switch entry {
            case .name(let name, let entryPort):
                guard entryPort == nil || entryPort == port, !isAddress else { continue }
                if host == name || host.hasSuffix("." + name) { return true }
            case .network(let range, let entryPort):
                guard entryPort == nil || entryPort == port, isAddress else { continue }
                if range.contains(host) { return true }
            }
        }
        return false
    }
}
