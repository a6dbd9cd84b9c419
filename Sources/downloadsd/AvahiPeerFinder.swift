import DownloadEngine
import LANShare
import Logging

/// The engine's `PeerFinder` over avahi-daemon (`AvahiBrowser` on the system bus, in both
/// modes: a user's daemon reaches Avahi as it reaches NetworkManager). Each peer found becomes a
/// source at Passim's URL; a Passim peer (no TXT `ranges=1`) is told of for one hash at most once
/// an hour (`PassimLedger`): a second task for the same file within the hour, or the same task
/// after a restart of its run, is not sent to it again.
final class AvahiPeerFinder: PeerFinder {
    private let browser: AvahiBrowser
    private let logger: Logger
    private let passim = PassimLedger()

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
                    guard peer.takesRanges || passim.mayAsk(peer.address, sha256) else {
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
}
