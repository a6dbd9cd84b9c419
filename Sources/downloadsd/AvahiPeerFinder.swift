import DownloadEngine
import LANShare
import Logging
import NIOConcurrencyHelpers

/// The engine's `PeerFinder` over avahi-daemon (`AvahiBrowser` on the system bus, in both
/// modes: a user's daemon reaches Avahi as it reaches NetworkManager). Each peer found becomes a
/// source at Passim's URL; a Passim peer (no TXT `ranges=1`) is told of for one hash at most once
/// an hour, since Passim answers one request per hash an hour to each client and counts a Range
/// request as one (`passim_server_check_client_cooldown`): a second task for the same file
/// within the hour, or the same task after a restart of its run, is not sent to it again.
final class AvahiPeerFinder: PeerFinder {
    /// How long a Passim peer is not asked again for the same hash.
    static let passimCooldown: Duration = .seconds(3600)

    private let browser: AvahiBrowser
    private let logger: Logger
    /// "ADDRESS SHA256" → when a Passim peer was last told of for it. In memory: a restart of
    /// the daemon within the hour could ask again (Passim then answers 403, taken as done).
    private let asked = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])

    init(browser: AvahiBrowser? = nil, logger: Logger) {
        self.browser = browser ?? AvahiBrowser(logger: logger)
        self.logger = logger
    }

    func peers(offering sha256: String, name: String) -> AsyncStream<PeerNews> {
        let found = browser.peers(sha256)
        let (stream, out) = AsyncStream.makeStream(of: PeerNews.self)
        let work = Task { [self] in
            for await event in found {
                switch event {
                case .found(let peer):
                    guard peer.takesRanges || mayAsk(peer.address, sha256) else {
                        logger.info(
                            "the Passim peer \(peer.address) was asked for this file within the hour; not again")
                        continue
                    }
                    out.yield(
                        .joined(PeerOffer(url: peer.url(sha256: sha256, name: name), takesRanges: peer.takesRanges)))
                case .gone(let peer):
                    out.yield(.left(url: peer.url(sha256: sha256, name: name)))
                case .allForNow:
                    break
                }
            }
            out.finish()
        }
        out.onTermination = { _ in work.cancel() }
        return stream
    }

    /// Whether a Passim peer at `address` may be asked for `sha256` now (and, if so, it counts as asked).
    private func mayAsk(_ address: String, _ sha256: String) -> Bool {
        let now = ContinuousClock.now
        return asked.withLockedValue { asked in
            asked = asked.filter { now - $0.value < Self.passimCooldown }
            guard asked["\(address) \(sha256)"] == nil else { return false }
            asked["\(address) \(sha256)"] = now
            return true
        }
    }
}
