/// What `AvahiBrowser.peers` tells of the machines offering a file: one found, one gone (its
/// service withdrawn or its machine off the network), or all Avahi knows told for now (about a
/// second with a cold cache).
public enum PeerEvent: Sendable, Hashable {
    case found(LANPeer)
    case gone(LANPeer)
    case allForNow
}
