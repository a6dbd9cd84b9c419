/// A machine of the local network offering a file by its SHA-256, as a `PeerFinder` found it.
public struct PeerOffer: Sendable, Hashable {
    /// Passim's URL of the file there: `https://ADDRESS:PORT/NAME?sha256=HEX`.
    public var url: String
    /// A peer of this service (TXT `ranges=1`) takes byte ranges like a mirror. Without it, a
    /// Passim peer: it answers one GET per hash an hour to each client and counts a Range
    /// request as one, so it is asked for one contiguous range once.
    public var takesRanges: Bool

    public init(url: String, takesRanges: Bool) {
        self.url = url
        self.takesRanges = takesRanges
    }
}
