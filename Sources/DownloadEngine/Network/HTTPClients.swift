import AsyncHTTPClient
import DownloadModel
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import ProxyRules

/// The HTTP clients every request goes through, and which one a request takes.
///
/// - `.multiplexed`: the connections single-stream downloads and uploads share: HTTP/1.1 with
///   keep-alive, or, when the daemon offers HTTP/2 (`offerHTTP2`, `--http2`) and the server takes
///   it (ALPN), streams of one HTTP/2 connection per host.
/// - `.separate`: HTTP/1.1 only, so N requests at once are N TCP connections: the connections
///   of a segmented download (`connections: N` means N connections, as aria2's `-x`; over HTTP/2
///   they would all be streams of one connection, which gains nothing against a server that
///   limits each connection or a path one TCP window cannot fill).
///
/// A request that does not go straight to the server by the usual lookup takes a client of its
/// `Route`: owners held to `deniedNetworks` get clients pinned (through `dnsOverride`, keeping
/// the name for TLS) to a checked address, so no later lookup can swap in another one; a request
/// through a proxy gets a client configured with that proxy (AsyncHTTPClient sets proxies per
/// client). Such a client is kept per (route, kind) and shared by the requests of that route
/// while they use it: a TCP and TLS handshake (and a CONNECT) per host, not per request. One that
/// no request has used for `idleTimeout` is shut down (the pool's own idle connections close
/// after the same time).
///
/// Trust: the system store (`/etc/ssl/certs/ca-certificates.crt`, what `update-ca-certificates`
/// writes), plus an administrator's `caFile`; certificate and host-name checks are always on.
/// The clients' settings are `HTTPClientSettings`'.
///
/// The lock (`pinned`) is a leaf: nothing else is taken under it, and clients are shut down
/// outside it.
final class HTTPClients: Sendable {
    enum Kind: Hashable, Sendable {
        case multiplexed
        case separate
    }

    /// How one request reaches its server, when not by the shared clients: pinned to an
    /// address, through a proxy, or both.
    struct Route: Hashable, Sendable {
        /// The owner, when the address is pinned for them (0 otherwise: a proxy's client is shared).
        var owner: UInt32 = 0
        /// The server's host and port, and the address it is pinned to (nil: looked up as usual).
        var host = ""
        var port = 0
        var address: String?
        var proxy: ProxySetting?
        /// The proxy's own checked address (nil: its name is looked up as usual).
        var proxyAddress: String?
        /// A task's own `connect_timeout` (seconds) through a proxy: it bounds the connection and
        /// the CONNECT or SOCKS handshake too (AsyncHTTPClient gives them one deadline, from
        /// the client's configuration). nil: the daemon's.
        var connectTimeout: Double?
    }

    /// A client for one request; hand it back with `release` when the request ended.
    struct Lease: Sendable {
        let client: HTTPClient
        fileprivate let key: PinKey?
        /// What tells a request which connection it went on (`ConnectionWatch`).
        let watch: ConnectionWatch
        /// The address a pinned client connects to (nil: the host name is looked up as usual).
        var pinnedAddress: String? { key?.route.address }
        /// The proxy the request goes through, if any.
        var proxy: ProxySetting? { key?.route.proxy }
        /// The proxy's checked address (nil: its name is looked up as usual).
        var proxyAddress: String? { key?.route.proxyAddress }
    }

    fileprivate struct PinKey: Hashable, Sendable {
        let route: Route
        let kind: Kind
    }

    private struct Pinned {
        let client: HTTPClient
        var users: Int
        var idleSince: NIODeadline?
    }

    private struct State {
        var pinned: [PinKey: Pinned] = [:]
        var shutDown = false
    }

    let multiplexedConfiguration: HTTPClient.Configuration
    let separateConfiguration: HTTPClient.Configuration
    private let multiplexedClient: HTTPClient
    private let separateClient: HTTPClient
    private let state = NIOLockedValueBox(State())
    let idleTimeout: TimeAmount
    /// Every client's connections report to it, so a request's metrics say which it went on.
    let watch: ConnectionWatch
    let tlsConfiguration: TLSConfiguration

    /// - Parameters:
    ///   - connectionsPerHost: HTTP/1.1 connections one client opens to one host at once. The
    ///     manager passes the scheduler's total (`maxConnections`), so this limit never binds: the
    ///     places the scheduler grants bound every task's connections, and the one per-host rule is
    ///     `MirrorSet`'s (`maxConnectionsPerHost`, for downloads with mirrors).
    ///   - offerHTTP2: whether `.multiplexed` clients offer HTTP/2 (ALPN); `.separate` ones never do.
    init(
        connectTimeout: Double, caFile: String?, connectionsPerHost: Int,
        idleTimeout: TimeAmount = HTTPClientSettings.idleTimeout, offerHTTP2: Bool = false
    ) {
        let tls = HTTPClientSettings.tls(caFile: caFile)
        let watch = ConnectionWatch()
        self.watch = watch
        tlsConfiguration = tls
        self.idleTimeout = idleTimeout
        var multiplexed = HTTPClientSettings.configuration(
            http1Only: !offerHTTP2, tls: tls, connectTimeout: connectTimeout, connectionsPerHost: connectionsPerHost,
            idleTimeout: idleTimeout
        )
        var separate = HTTPClientSettings.configuration(
            http1Only: true, tls: tls, connectTimeout: connectTimeout, connectionsPerHost: connectionsPerHost,
            idleTimeout: idleTimeout
        )
        Self.prepare(&multiplexed, watch: watch, proxied: false)
        Self.prepare(&separate, watch: watch, proxied: false)
        multiplexedConfiguration = multiplexed
        separateConfiguration = separate
        multiplexedClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: multiplexed)
        separateClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: separate)
    }

    /// What every client's connections are given: the watch, reads that may grow (`ReceiveBuffer`)
    /// and, over HTTP/2, windows as wide as a long link needs (`HTTP2Windows`).
    private static func prepare(_ configuration: inout HTTPClient.Configuration, watch: ConnectionWatch, proxied: Bool)
    {
        watch.install(in: &configuration, proxied: proxied)
        ReceiveBuffer.install(in: &configuration)
        HTTP2Windows.install(in: &configuration)
    }

    /// The shared client of `kind`.
    func lease(_ kind: Kind) -> Lease {
        Lease(client: kind == .multiplexed ? multiplexedClient : separateClient, key: nil, watch: watch)
    }

    /// The client of `route`: the one already open, or a new one; the shared one for a route
    /// that neither pins nor proxies.
    func lease(_ kind: Kind, route: Route) -> Lease {
        guard route.address != nil || route.proxy != nil else { return lease(kind) }
        let key = PinKey(route: route, kind: kind)
        let (client, expired) = state.withLockedValue { state -> (HTTPClient?, [HTTPClient]) in
            let expired = Self.takeExpired(&state, now: .now(), idleTimeout: idleTimeout)
            if var entry = state.pinned[key] {
                entry.users += 1
                entry.idleSince = nil
                state.pinned[key] = entry
                return (entry.client, expired)
            }
            return (nil, expired)
        }
        Self.shutDown(expired)
        if let client { return Lease(client: client, key: key, watch: watch) }
        var configuration = kind == .multiplexed ? multiplexedConfiguration : separateConfiguration
        if let address = route.address { configuration.dnsOverride = [route.host: address] }
        if let seconds = route.connectTimeout { configuration.timeout.connect = .milliseconds(Int64(seconds * 1000)) }
        switch route.proxy {
        case .http(let host, let port, let credentials):
            configuration.proxy = .server(
                host: route.proxyAddress ?? host, port: port,
                authorization: credentials.map { .basic(username: $0.user, password: $0.password) }
            )
        case .socks5(let host, let port, _):
            configuration.proxy = .socksServer(host: route.proxyAddress ?? host, port: port)
        case .direct, nil:
            break
        }
        if route.proxy != nil && route.proxy != .direct { Self.prepare(&configuration, watch: watch, proxied: true) }
        let made = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        // Another request of the same owner may have made one meanwhile: keep the first.
        let (chosen, surplus) = state.withLockedValue { state -> (HTTPClient, HTTPClient?) in
            if state.shutDown { return (made, nil) }
            if var entry = state.pinned[key] {
                entry.users += 1
                entry.idleSince = nil
                state.pinned[key] = entry
                return (entry.client, made)
            }
            state.pinned[key] = Pinned(client: made, users: 1, idleSince: nil)
            return (made, nil)
        }
        if let surplus { Self.shutDown([surplus]) }
        return Lease(client: chosen, key: key, watch: watch)
    }

    /// Hands a lease back. A pinned client left unused is shut down after `idleTimeout`.
    func release(_ lease: Lease) {
        guard let key = lease.key else { return }
        let (orphan, idle) = state.withLockedValue { state -> (HTTPClient?, Bool) in
            guard var entry = state.pinned[key], entry.client === lease.client else {
                // Made after shutdown, or replaced: nobody else holds it.
                return (lease.client, false)
            }
            entry.users -= 1
            if entry.users == 0 { entry.idleSince = .now() }
            state.pinned[key] = entry
            return (nil, entry.users == 0)
        }
        if let orphan { Self.shutDown([orphan]) }
        guard idle else { return }
        let delay = idleTimeout + .milliseconds(100)
        Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(max(0, delay.nanoseconds)))
            self?.reap()
        }
    }

    /// Pinned clients open now (for tests and logs).
    var pinnedCount: Int { state.withLockedValue { $0.pinned.count } }

    /// Shuts down the pinned clients idle for `idleTimeout`.
    func reap() {
        let expired = state.withLockedValue { Self.takeExpired(&$0, now: .now(), idleTimeout: idleTimeout) }
        Self.shutDown(expired)
    }

    /// Shuts every client down; leases taken after this are shut down on release.
    func shutdown() async {
        let pinned = state.withLockedValue { state -> [HTTPClient] in
            state.shutDown = true
            defer { state.pinned = [:] }
            return state.pinned.values.map(\.client)
        }
        for client in pinned + [multiplexedClient, separateClient] {
            try? await client.shutdown()
        }
    }

    private static func takeExpired(_ state: inout State, now: NIODeadline, idleTimeout: TimeAmount) -> [HTTPClient] {
        let expired = state.pinned.filter { _, entry in
            entry.users == 0 && (entry.idleSince.map { now - $0 >= idleTimeout } ?? false)
        }
        for key in expired.keys { state.pinned[key] = nil }
        return expired.values.map(\.client)
    }

    private static func shutDown(_ clients: [HTTPClient]) {
        for client in clients { client.shutdown { _ in } }
    }
}
