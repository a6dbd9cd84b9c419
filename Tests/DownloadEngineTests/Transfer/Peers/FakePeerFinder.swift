import DownloadEngine
import NIOConcurrencyHelpers

/// A `PeerFinder` that tells of the peers it was given, at once, and records every lookup (the
/// hash and the name asked for). Stands for avahi-daemon, which the rig tests use for real.
final class FakePeerFinder: PeerFinder {
    let offers: [PeerOffer]
    let lookups = NIOLockedValueBox<[(sha256: String, name: String)]>([])

    init(_ offers: [PeerOffer]) { self.offers = offers }

    func peers(offering sha256: String, name: String) -> AsyncStream<PeerNews> {
        lookups.withLockedValue { $0.append((sha256, name)) }
        let (stream, out) = AsyncStream.makeStream(of: PeerNews.self)
        for offer in offers { out.yield(.joined(offer)) }
        // Kept open as a browse is, until the run stops listening.
        return stream
    }
}
