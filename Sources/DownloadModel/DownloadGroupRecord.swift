/// A group of tasks that is one job (`StartGroup`): its files are tasks like any other (each
/// with its record's `group` set to this id), started, watched and ended together. An atomic
/// group publishes no file until every one is complete and durable, then all of them in one
/// step a restart finishes (`publishing`, recorded before the first rename).
public struct DownloadGroupRecord: Sendable, Hashable {
    public var id: UInt64
    /// The uid the group belongs to, as its tasks do.
    public var owner: UInt32
    /// The sandboxed app it belongs to ("" for a host caller).
    public var app: String
    /// The session's name as stored (a sandboxed app's carries its app id, see the service).
    public var session: String
    public var title: String
    public var atomic: Bool
    /// Whether the group's tasks send their own progress and state signals (false: only the
    /// group's are sent; the tasks' properties stay readable).
    public var taskSignals: Bool
    /// Files of the group that run at once (0: as many as the daemon's limits allow).
    public var parallel = 0
    /// The group's bandwidth, shared by its running files (0: none).
    public var maxBytesPerSecond: UInt64 = 0
    /// The decision to publish every file was recorded: from here on the group only finishes
    /// (a restart completes the renames; nothing may fail it).
    public var publishing = false

    public init(id: UInt64, owner: UInt32, app: String, session: String, title: String, atomic: Bool, taskSignals: Bool)
    {
        self.id = id
        self.owner = owner
        self.app = app
        self.session = session
        self.title = title
        self.atomic = atomic
        self.taskSignals = taskSignals
    }
}
