import Logging
import NIOSSL

/// What `RequestSender` needs of whoever sends a task's requests, and nothing of a run: the
/// service's network settings (timeouts, proxies, the networks a user may not reach), a log, and
/// the connections of its pool. `TransferRunOwner` is one (the manager, a test's fake owner).
protocol ConnectionLender: Sendable {
    var network: NetworkSettings { get }
    var logger: Logger { get }
    /// A client of the pool for `route` (chosen by `RequestSender`: direct, pinned to a checked
    /// address, or through a proxy); handed back with `release` after the request.
    func lease(_ kind: HTTPClients.Kind, route: HTTPClients.Route) -> HTTPClients.Lease
    func release(_ lease: HTTPClients.Lease)
    /// The trust the clients use (for explaining a failed certificate check).
    var tlsConfiguration: TLSConfiguration { get }
}
