import Crypto
import DownloadModel
import NIOSSL

/// The manager as the owner of its transfer runs: what a run may ask of it (`TransferRunOwner`),
/// each answered with the manager's own locks, never the run's.
extension SessionManager: TransferRunOwner {
    var events: EventDelivery { delegate }
    var resumeDataKey: SymmetricKey { key }
    var tlsConfiguration: TLSConfiguration { clients.tlsConfiguration }

    func requeue(_ record: DownloadTaskRecord) {
        state.withLockedValue { $0.scheduler.enqueue(record) }
    }

    func offerPlaces() { schedule() }

    func lease(_ kind: HTTPClients.Kind, route: HTTPClients.Route) -> HTTPClients.Lease {
        clients.lease(kind, route: route)
    }

    func release(_ lease: HTTPClients.Lease) { clients.release(lease) }
}
