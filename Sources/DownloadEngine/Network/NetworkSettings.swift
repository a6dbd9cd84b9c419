import ProxyRules

/// The service's settings every request is sent under (the daemon's options; a test's own): what
/// Network/ takes of the service's configuration, and nothing else of it.
struct NetworkSettings: Sendable {
    /// Seconds to connect (and finish a TLS handshake) when the task names none.
    var connectTimeout: Double
    /// The proxies of the daemon's environment (`http_proxy`, `no_proxy`, …).
    var proxyEnvironment: ProxyEnvironment
    /// Networks no user but root may reach (`--deny-network`).
    var deniedNetworks: [NetworkRange]
}
