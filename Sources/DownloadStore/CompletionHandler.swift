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
    /// The kinds of question (`Challenge.Kind`'s names) the object answers (`HandleChallenge`):
    /// none unless it said so, so a client of before is never asked.
    public var challenges: Set<String>
    /// Seconds it is given to answer one.
    public var challengeTimeout: UInt32

    /// Seconds an app is given to answer a question unless it says otherwise.
    public static let defaultChallengeTimeout: UInt32 = 120

    public init(
        owner: UInt32, session: String, connection: String, objectPath: String, busName: String?, busID: String?,
        challenges: Set<String> = [], challengeTimeout: UInt32 = CompletionHandler.defaultChallengeTimeout
    ) {
        self.challenges = challenges
        self.challengeTimeout = challengeTimeout
        self.owner = owner
        self.session = session
        self.connection = connection
        self.objectPath = objectPath
        self.busName = busName
        self.busID = busID
    }
}
