import DownloadModel
import ProxyRules

/// The route of each request: shared, pinned for owners held to `deniedNetworks`, or
/// configured with the request's proxy.
extension RequestSender {
    /// The client for one request of `user` to `scheme://host:port` (see `HTTPClients`).
    ///
    /// The proxy: the task's own `proxy` option (`direct://` for none), else the daemon's
    /// environment (`ProxyEnvironment`, with its `no_proxy`). With `socks5://` the server's name
    /// is resolved here and its address sent to the proxy; with `socks5h://` and HTTP proxies the
    /// name is sent (the proxy resolves it; an HTTP proxy gets the address when the name was
    /// resolved here to judge it, below).
    ///
    /// When the user's downloads are held to `deniedNetworks`: the proxy's address is judged and
    /// pinned like a server's; the server's address is judged when it is an address, or a name
    /// that resolves here (then the request goes to that address). A name that does not resolve
    /// here goes to an HTTP proxy as a name (offices where only the proxy resolves outside
    /// names); `socks5h` names are never resolved here (the caller asked for the proxy to do it).
    /// `send` hands the lease back to the run's owner after the request.
    ///
    /// A name resolved here may have several checked addresses (IPv6 and IPv4): the lease is
    /// pinned to the first not in `avoiding` (those a connection to was refused), in the
    /// resolver's order (RFC 6724: IPv6 first); `untried` says how many checked ones are left
    /// after it, for the sender to go on with (`exchange`).
    ///
    /// The source's `rules` give the user, the proxy (with its app's answer to that proxy's 407)
    /// and the task's connect timeout, which a proxied route's client takes for its handshakes.
    func lease(
        _ kind: HTTPClients.Kind, _ rules: SourceRules, host: String, port: Int, avoiding: Set<String> = []
    ) async throws -> (lease: HTTPClients.Lease, untried: Int) {
        let configuration = owner.network
        var route = HTTPClients.Route()
        let proxy = rules.proxy(in: configuration)
        route.proxy = proxy
        if let proxy, proxy != .direct { route.connectTimeout = rules.connectTimeout }
        let user = rules.user
        let denied = user == 0 ? [] : configuration.deniedNetworks
        func deniedRange(_ address: String) -> NetworkRange? { denied.first { $0.contains(address) } }
        if let proxy, let proxyHost = proxy.host, let proxyPort = proxy.port, !denied.isEmpty {
            if NetworkRange.parse(proxyHost) != nil {
                if let range = deniedRange(proxyHost) {
                    throw DownloadError.accessDenied(
                        "the proxy \(proxy) is in a network this service does not reach for you (\(range))")
                }
            } else {
                let addresses: [String]
                do {
                    addresses = try await AddressResolver.resolve(proxyHost, port: proxyPort)
                } catch let error as DownloadError {
                    throw DownloadError.proxy("the proxy \(proxy): \(error.message)")
                }
                guard let allowed = addresses.first(where: { deniedRange($0) == nil }) else {
                    throw DownloadError.accessDenied(
                        "every address of the proxy \(proxy) is in a network this service does not reach for you")
                }
                route.proxyAddress = allowed
            }
        }
        if NetworkRange.parse(host) != nil {
            if let range = deniedRange(host) {
                throw DownloadError.accessDenied(
                    "\(host) is in a network this service does not reach for you (\(range))")
            }
            return (owner.lease(kind, route: route), 0)
        }
        let resolvesHere: Bool
        switch proxy {
        case .socks5(_, _, let resolvesNames): resolvesHere = !resolvesNames
        case .http: resolvesHere = !denied.isEmpty
        case .direct, nil: resolvesHere = !denied.isEmpty
        }
        guard resolvesHere else { return (owner.lease(kind, route: route), 0) }
        let addresses: [String]
        do {
            addresses = try await AddressResolver.resolve(host, port: port)
        } catch  where proxy != nil && !isSOCKS(proxy) {
            // Only the proxy may know this name.
            return (owner.lease(kind, route: route), 0)
        }
        let checked = addresses.filter { deniedRange($0) == nil && !avoiding.contains($0) }
        guard let allowed = checked.first else {
            let ranges = Set(addresses.compactMap { deniedRange($0)?.description }).sorted().joined(separator: ", ")
            throw DownloadError.accessDenied(
                "every address of \(host) is in a network this service does not reach for you (\(ranges))")
        }
        route.owner = denied.isEmpty ? 0 : user
        route.host = host
        route.port = port
        route.address = allowed
        return (owner.lease(kind, route: route), checked.count - 1)
    }

    private func isSOCKS(_ proxy: ProxySetting?) -> Bool {
        if case .socks5 = proxy { return true }
        return false
    }
}
