/// The daemon-wide proxy an administrator sets in the daemon's environment (a systemd drop-in),
/// read as curl reads it: `http_proxy` for http URLs (lower case only: `HTTP_PROXY` can be set by
/// a CGI request's `Proxy:` header, httpoxy), `https_proxy`/`HTTPS_PROXY` for https URLs,
/// `all_proxy`/`ALL_PROXY` for both when the scheme's own is unset, and `no_proxy`/`NO_PROXY` for
/// the hosts that bypass them (`NoProxyList`). The lower-case form wins when both are set. A value
/// that does not parse is reported once when the daemon starts (`problems`) and ignored.
public struct ProxyEnvironment: Sendable, Hashable {
    public let http: ProxySetting?
    public let https: ProxySetting?
    public let noProxy: NoProxyList
    /// What could not be used, for the daemon's log (never a credential).
    public let problems: [String]

    public static let none = ProxyEnvironment(http: nil, https: nil, noProxy: NoProxyList(""), problems: [])

    public init(http: ProxySetting?, https: ProxySetting?, noProxy: NoProxyList, problems: [String]) {
        self.http = http
        self.https = https
        self.noProxy = noProxy
        self.problems = problems
    }

    public init(_ environment: [String: String]) {
        var problems: [String] = []
        func value(_ names: [String]) -> (name: String, text: String)? {
            for name in names {
                let text = Substring(environment[name] ?? "").drop { $0 == " " || $0 == "\t" }.reversed().drop {
                    $0 == " " || $0 == "\t"
                }
                if !text.isEmpty { return (name, String(text.reversed())) }
            }
            return nil
        }
        func setting(_ names: [String]) -> ProxySetting? {
            guard let (name, text) = value(names) else { return nil }
            do {
                return try ProxySetting.parse(text)
            } catch {
                problems.append("\(name) is ignored: \(error.message)")
                return nil
            }
        }
        let all = setting(["all_proxy", "ALL_PROXY"])
        http = setting(["http_proxy"]) ?? all
        https = setting(["https_proxy", "HTTPS_PROXY"]) ?? all
        noProxy = NoProxyList(value(["no_proxy", "NO_PROXY"])?.text ?? "")
        self.problems = problems
    }

    /// The proxy of a request whose task gives `own` (`direct://`: none; nil: it gives none),
    /// else this environment's for `scheme://host:port`; nil for none.
    public func proxy(own: ProxySetting?, scheme: String, host: String, port: Int) -> ProxySetting? {
        guard let own else { return proxy(scheme: scheme, host: host, port: port) }
        return own == .direct ? nil : own
    }

    /// The proxy for a request to `scheme://host:port`, nil for none.
    public func proxy(scheme: String, host: String, port: Int) -> ProxySetting? {
        let chosen = scheme.lowercased() == "https" ? https : http
        guard let chosen, chosen != .direct, !noProxy.matches(host: host, port: port) else { return nil }
        return chosen
    }
}
