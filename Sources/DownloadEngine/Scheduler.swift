/// Which queued tasks may start: a global limit on running transfers and one on the connections
/// they open (a segmented download with `connections` 4 counts four), shared fairly between users
/// by connections, a limit of transfers per session (a session is one user's: `SessionID`), and
/// within one user higher priorities first, FIFO within a priority; only tasks the network allows
/// (nothing offline, only `allow_metered` ones on a metered network). A task whose connections do
/// not all fit starts with the places that are free (its `connections` is a maximum, as aria2's
/// `-x` is), so smaller tasks behind it never pass it for ever. Pure bookkeeping, tested without I/O.
struct Scheduler: Sendable {
    var maxRunning: Int
    var maxRunningPerSession: Int
    var maxConnections: Int
    var network = NetworkStatus()

    private struct Entry: Sendable {
        let id: UInt64
        let session: SessionID
        var priority: DownloadOptions.Priority
        var allowMetered: Bool
        /// Connections it opens when it runs.
        var weight: Int
        let sequence: UInt64
    }

    private var queued: [Entry] = []
    private var running: [UInt64: (session: SessionID, weight: Int)] = [:]
    private var sequence: UInt64 = 0

    init(maxRunning: Int, maxRunningPerSession: Int, maxConnections: Int = 16) {
        self.maxRunning = max(1, maxRunning)
        self.maxRunningPerSession = max(1, maxRunningPerSession)
        self.maxConnections = max(1, maxConnections)
    }

    var runningCount: Int { running.count }
    /// The connections a running task was granted (1 when it is not running).
    func connections(of id: UInt64) -> Int { running[id]?.weight ?? 1 }
    /// Places taken: the connections of the running tasks.
    var connectionCount: Int { running.values.reduce(0) { $0 + $1.weight } }
    var queuedIDs: [UInt64] { queued.map(\.id) }

    mutating func enqueue(
        _ id: UInt64, session: SessionID, priority: DownloadOptions.Priority, allowMetered: Bool = true, connections: Int = 1
    ) {
        guard running[id] == nil, !queued.contains(where: { $0.id == id }) else { return }
        sequence += 1
        queued.append(Entry(
            id: id, session: session, priority: priority, allowMetered: allowMetered,
            weight: max(1, min(connections, maxConnections)), sequence: sequence
        ))
    }

    mutating func enqueue(_ id: UInt64, session: SessionID, options: DownloadOptions) {
        enqueue(id, session: session, priority: options.priority, allowMetered: options.allowMetered, connections: options.connections)
    }

    /// A queued task's options changed (its priority moves it within the order).
    mutating func update(_ id: UInt64, _ options: DownloadOptions) {
        guard let index = queued.firstIndex(where: { $0.id == id }) else { return }
        queued[index].priority = options.priority
        queued[index].allowMetered = options.allowMetered
    }

    /// Forgets a task, queued or running.
    mutating func remove(_ id: UInt64) {
        queued.removeAll { $0.id == id }
        running.removeValue(forKey: id)
    }

    /// The tasks to start now, marked running. Places are shared fairly between users: each free
    /// place goes to the user with the fewest running connections who has a task that may start
    /// (ties: whoever has waited longest), so one user's thousand tasks never keep another's
    /// from starting; priority then FIFO order only that user's own tasks.
    mutating func next() -> [UInt64] {
        var started: [UInt64] = []
        while running.count < maxRunning && connectionCount < maxConnections && network.online {
            var runningPerSession: [SessionID: Int] = [:]
            var runningPerOwner: [UInt32: Int] = [:]
            for (session, weight) in running.values {
                runningPerSession[session, default: 0] += 1
                runningPerOwner[session.owner, default: 0] += weight
            }
            let free = maxConnections - connectionCount
            // Each user's best task that may start now.
            var best: [UInt32: Entry] = [:]
            for entry in queued where runningPerSession[entry.session, default: 0] < maxRunningPerSession
                && network.allows(allowMetered: entry.allowMetered) {
                let owner = entry.session.owner
                if let current = best[owner], !Scheduler.before(entry, current) { continue }
                best[owner] = entry
            }
            let chosen = best.values.min { a, b in
                let ra = runningPerOwner[a.session.owner, default: 0], rb = runningPerOwner[b.session.owner, default: 0]
                return ra != rb ? ra < rb : a.sequence < b.sequence
            }
            guard let entry = chosen else { break }
            running[entry.id] = (entry.session, min(entry.weight, free))
            queued.removeAll { $0.id == entry.id }
            started.append(entry.id)
        }
        return started
    }

    /// Within one user: higher priority first, then first come.
    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.priority != b.priority ? a.priority > b.priority : a.sequence < b.sequence
    }
}
