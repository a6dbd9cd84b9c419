import DownloadModel
import NIOSSL
import ShownText

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

    /// Said once per reason for the daemon's life: a file system without user attributes
    /// refuses them for every file, and each download is still a success.
    func originAttributesRefused(_ code: Int32, attribute: String, at path: String) {
        guard state.withLockedValue({ $0.attributeRefusals.insert(code).inserted }) else { return }
        logger.notice(
            "\(DisplayText.quoted(path, limit: 200)) is published without \(attribute): \(errnoText(code)) (said once for this reason)"
        )
    }
}
