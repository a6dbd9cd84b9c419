/// Where to call `HandleEventsForBackgroundSession` for one session of one user.
public struct CompletionHandler: Sendable, Hashable {
    public var owner: UInt32
    public var session: String
    /// The registering connection's unique name (gone when the app quits).
    public var connection: String
    public var objectPath: String
    /// A well-known name the app owned when it registered: the call goes there with auto-start.
    public var busName: String?
    /// The id of the bus instance `connection` belongs to: after the bus restarts, unique names
    /// are given again, so a handler of an earlier instance is never sent to its unique name.
    public var busID: String?

    public init(
        owner: UInt32, session: String, connection: String, objectPath: String, busName: String?, busID: String?
    ) {
        self.owner = owner
        self.session = session
        self.connection = connection
        self.objectPath = objectPath
        self.busName = busName
        self.busID = busID
    }
}
