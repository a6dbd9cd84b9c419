/// A stored task that could not be read back (a damaged row): left in the database as it is,
/// not served, and logged by the daemon with its reason.
public struct RejectedTask: Sendable, Hashable {
    public var id: Int64
    public var reason: String
}
