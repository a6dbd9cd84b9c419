/// What a `PeerFinder` tells a run: a peer was found, or a peer it told of has gone.
public enum PeerNews: Sendable, Hashable {
    case joined(PeerOffer)
    /// The peer of this URL withdrew its offer (or its machine left the network).
    case left(url: String)
}
