/// Finds the machines of the local network that have a file by its SHA-256 (a task's
/// `lan_peers`). The engine knows no D-Bus and no Avahi: the daemon gives it one
/// (`SessionManager.Configuration.peerFinder`, over avahi-daemon's browser in downloadsd).
/// A run of a task with `lan_peers` and a whole-file sha-256 asks it at its start and does not
/// wait: each peer joins the running download as a source of kind `peer` as it is told of
/// (`PeerNews`), beside the URL and its mirrors, and leaves when told so or when it fails.
public protocol PeerFinder: Sendable {
    /// The peers of `sha256` (64 lower-case hex) as they are found, until the consumer stops
    /// iterating (the run ended) or the finder has no more to say. `name` is the file's name, the
    /// label of Passim's URL (`/NAME?sha256=HEX`).
    func peers(offering sha256: String, name: String) -> AsyncStream<PeerNews>
}
