import DownloadModel
import NIOSSL

/// The manager as the owner of its transfer runs: what a run may ask of it (`TransferRunOwner`),
/// each answered with the manager's own locks, never the run's. What a run reports of its task
/// is applied in SessionManager+TaskChanges.
extension SessionManager: TransferRunOwner {
    var events: EventDelivery { delegate }
    var tlsConfiguration: TLSConfiguration { clients.tlsConfiguration }

    func lease(_ kind: HTTPClients.Kind, route: HTTPClients.Route) -> HTTPClients.Lease {
        clients.lease(kind, route: route)
    }

    func release(_ lease: HTTPClients.Lease) { clients.release(lease) }
}
