import DownloadModel
import ShownText

/// LAN peers (`lan_peers`): a download whose file is known by its sha-256 asks the daemon's
/// `PeerFinder` for the machines of the local network that have it, at the start of its first
/// attempt that knows the hash (a Metalink document's hash once it is followed), without waiting.
/// Each peer told of joins the running download as a source of kind `peer` (`MirrorSet`,
/// `takeSource`) and the run asks the scheduler for a place for it; a peer told gone is dropped.
/// A peer's bytes are checked like a mirror's: piece by piece with a Metalink's piece hashes
/// (a corrupt piece drops its source), else by the whole-file check at the end, which, failing
/// with bytes from peers, fetches the file again without them (`peersSpoiledTheFile`): the
/// task never fails for a peer.
extension TransferRun {
    /// The sha-256 peers are looked for by: the task's, when it asked for `lan_peers`, the
    /// daemon finds peers and they were not given up in this run.
    var peerHash: String? {
        let options = task.record.options
        guard options.lanPeers, configuration.peerFinder != nil, let checksum = options.checksum,
            checksum.algorithm == .sha256, !segmentState.withLockedValue({ $0.peersBanned })
        else { return nil }
        return checksum.hex
    }

    /// Starts the lookup of this run's peers, once (nothing without `peerHash`).
    func lookForPeers() {
        guard let sha256 = peerHash, let finder = configuration.peerFinder else { return }
        let name = HTTPHeaderRules.fileName(contentDisposition: nil, url: start.record.url)
        segmentState.withLockedValue { state in
            guard state.peerLookup == nil else { return }
            state.peerLookup = Task { [self] in
                for await news in finder.peers(offering: sha256, name: name) {
                    guard !Task.isCancelled else { break }
                    switch news {
                    case .joined(let peer): joined(peer)
                    case .left(let url): left(url)
                    }
                }
            }
        }
    }

    /// The peers told of by now, once the URL failed before any body: when none is known yet,
    /// up to `firstPeerWait` seconds for one (a cold lookup finds the first in about 150 ms, all
    /// it will find in about a second), so a machine cut off from the origin still gets the file
    /// from its network. Empty without a lookup.
    func peersSoon() async -> [PeerOffer] {
        guard segmentState.withLockedValue({ $0.peerLookup != nil }) else { return [] }
        let deadline = ContinuousClock.now + .milliseconds(Int64(Self.firstPeerWait * 1000))
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if !segmentState.withLockedValue({ $0.peersToJoin.isEmpty }) { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return segmentState.withLockedValue { $0.peersToJoin }
    }

    /// How long a download whose URL failed waits for a first peer.
    static let firstPeerWait: Double = 1.5

    /// Ends the lookup (the run ends).
    func stopLookingForPeers() {
        segmentState.withLockedValue { state in
            state.peerLookup?.cancel()
            state.peerLookup = nil
        }
    }

    private func joined(_ peer: PeerOffer) {
        let wanted = segmentState.withLockedValue { state -> Int? in
            guard !state.peersBanned, !state.peersToJoin.contains(peer),
                state.mirrors?.index(of: peer.url) == nil
            else { return nil }
            state.peersToJoin.append(peer)
            return (state.mirrors?.activePeers ?? 0) + state.peersToJoin.count
        }
        guard let wanted else { return }
        owner.logger.info(
            "task \(task.id): a LAN peer has the file: \(DisplayText.quoted(peer.url, limit: 200))\(peer.takesRanges ? "" : " (Passim: one request)")"
        )
        // A place for each peer beside the task's own connections; it joins at the next split,
        // or at once when the download is split already.
        let connections = min(DownloadOptions.maxConnections, start.record.options.connections + wanted)
        owner.apply(.wantsConnections(connections), to: task)
        owner.apply(.mayTakeMore, to: task)
    }

    private func left(_ url: String) {
        segmentState.withLockedValue { state in
            state.peersToJoin.removeAll { $0.url == url }
            if let index = state.mirrors?.index(of: url) { state.mirrors?.drop(index, because: "it left the network") }
        }
        owner.logger.info("task \(task.id): LAN peer \(DisplayText.quoted(url, limit: 200)) left")
    }

    /// The whole-file check failed: when peers sent bytes in this run, they are given up for
    /// the rest of it (true: the file is fetched again without them); false: no peer's bytes
    /// are in it, the mismatch is the URL's.
    func givesUpPeers() -> Bool {
        let gave = segmentState.withLockedValue { state -> Bool in
            guard (state.mirrors?.peerBytes ?? 0) > 0, !state.peersBanned else { return false }
            state.peersBanned = true
            state.peersToJoin = []
            state.mirrors?.dropPeers(because: "their bytes failed the whole-file check")
            state.peerLookup?.cancel()
            state.peerLookup = nil
            return true
        }
        if gave {
            owner.logger.warning(
                "task \(task.id): the file failed its sha-256 check with bytes from LAN peers; fetching it again without them"
            )
        }
        return gave
    }
}
