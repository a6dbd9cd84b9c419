import DBus
import DownloadsAPI
import FoundationEssentials
import ProxyRules

/// The proxy for a URL, resolved in the caller's own session and sent to the service as the
/// task's `proxy` option, so no proxy auto-configuration script ever runs in the daemon (which
/// may be root and serve every user):
///
/// 1. the desktop portal's `org.freedesktop.portal.ProxyResolver.Lookup` on the caller's session
///    bus, where a portal runs: it follows GNOME's and KDE's proxy settings, PAC and WPAD;
/// 2. else the caller's environment (`http_proxy`, `https_proxy`, `all_proxy`, `no_proxy`), with
///    the daemon's own rules (`ProxyEnvironment`, curl's).
///
/// nil means the session names no proxy for the URL: nothing is sent, and the daemon's own
/// setting (an administrator's) applies. The first answer of the portal the service can use is
/// taken (`http://`, `socks5://`, `socks5h://`; `socks://` as SOCKS5); `direct://` first is none.
public actor ProxyResolver {
    private let environment: ProxyEnvironment
    private let sessionBus: String?
    /// The first lookup: it opens the connection to the session bus and finds out whether a
    /// portal answers. Lookups asked for meanwhile (a list of URLs starts 64 at once) wait for it
    /// and then share its connection, instead of each opening one.
    private var first: Task<(portal: Connection?, answer: String??), Never>?
    private var portalMissing = false

    /// How long the portal may take (a PAC script or WPAD lookup runs behind it).
    public static let portalTimeout: Duration = .seconds(10)

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = ProxyEnvironment(environment)
        let address = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        sessionBus = address.isEmpty ? nil : address
    }

    /// Closes the connection to the portal, if one was opened.
    public func close() async {
        portalMissing = true
        await first?.value.portal?.close()
    }

    /// The `proxy` option for a download of `url`, or nil.
    public func proxy(for url: String) async -> String? {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), let host = parsed.host,
            !host.isEmpty
        else {
            return nil
        }
        // A proxy script is never shown a URL's user name and password (as browsers strip them).
        if let answer = await portalLookup(URLCredentials.split(url).url) {
            return answer
        }
        let port = parsed.port ?? (scheme == "https" ? 443 : 80)
        return environment.proxy(scheme: scheme, host: host, port: port)?.text
    }

    /// The portal's answer: `.some(nil)` when it says direct, nil when there is no portal (after
    /// one failed lookup the portal is not asked again by this resolver).
    private func portalLookup(_ url: String) async -> String?? {
        guard !portalMissing, let sessionBus else { return nil }
        if let first {
            guard let portal = await first.value.portal, !portalMissing else { return nil }
            return await ask(portal, url)
        }
        let opening = Task { [self] () -> (portal: Connection?, answer: String??) in
            guard let portal = try? await Connection.open(.address(sessionBus)) else { return (nil, nil) }
            let answer = await ask(portal, url)
            return (answer == nil ? nil : portal, answer)
        }
        first = opening
        return await opening.value.answer
    }

    /// One `Lookup`; nil (and the portal not asked again) when the call failed: no portal, or a
    /// portal without the interface, and the environment decides.
    private func ask(_ portal: Connection, _ url: String) async -> String?? {
        do {
            let reply = try await portal.call(
                destination: "org.freedesktop.portal.Desktop", path: "/org/freedesktop/portal/desktop",
                interface: "org.freedesktop.portal.ProxyResolver", method: "Lookup", arguments: [.string(url)],
                timeout: Self.portalTimeout
            )
            let proxies = reply.first?.stringArrayValue ?? []
            for proxy in proxies {
                let candidate =
                    proxy.lowercased().hasPrefix("socks://") ? "socks5://" + proxy.dropFirst("socks://".count) : proxy
                guard let setting = try? ProxySetting.parse(candidate) else { continue }
                return .some(setting == .direct ? nil : setting.text)
            }
            return .some(nil)
        } catch {
            if !portalMissing {
                portalMissing = true
                portal.close()
            }
            return nil
        }
    }
}
