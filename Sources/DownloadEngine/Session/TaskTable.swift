import DownloadModel
/// The manager's bookkeeping, all under its one lock: the tasks by id, per-owner counts, the
/// active tasks per session, the scheduler, the next id. Pure: no I/O, no events, no task locks
/// (Alamofire's request map, with the counts a quota check needs kept beside it).
struct TaskTable {
    private(set) var tasks: [UInt64: DownloadTask] = [:]
    /// Every task's id in ascending order (`ids(after:limit:)`: a page of a million tasks costs
    /// its own length, not a sort of all). A removed task's id stays until the next compaction
    /// (`stale`), made once the stale ids are half of the list.
    private var order: [UInt64] = []
    private var stale = 0
    /// Per owner: how many tasks, in which sessions (name → tasks). Kept with `tasks`, so
    /// Start's quota checks cost the same with ten thousand tasks as with ten.
    var owners: [UInt32: OwnerTasks] = [:]
    /// Queued, running or retrying tasks per session (for "the session has nothing left to do").
    var activePerSession: [SessionID: Int] = [:]
    /// Queued, running or retrying tasks per group: whether a group may have ended is known
    /// without looking at each of its files.
    var activePerGroup: [UInt64: Int] = [:]
    /// The questions out to apps, each with the tasks waiting for its answer (`OpenQuestion`).
    var questions: [OpenQuestion.Key: OpenQuestion] = [:]
    /// What apps answered them, per session and origin (`AnswerBook`).
    var answers = AnswerBook()
    /// Who answers the questions tasks meet (`SessionManager+Challenges`).
    var challengeAgent: (any ChallengeAgent)?
    /// The reasons (errno) origin attributes were refused for, each logged once.
    var attributeRefusals: Set<Int32> = []
    /// Sessions whose becoming idle was reported and that have had nothing active since: two
    /// tasks' ends that both find the session idle report it once.
    private(set) var reportedIdle: Set<SessionID> = []
    var scheduler: Scheduler
    /// The groups by id, with their tasks and an atomic group's files waiting to be published.
    var groups: [UInt64: GroupEntry] = [:]
    var nextGroupID: UInt64 = 1
    var nextID: UInt64 = 1
    var shuttingDown = false
    /// Counts the moments connections may work again (wake-up, the network back): a retry
    /// waiting for its delay goes at once when this changes.
    var reconnectGeneration: UInt64 = 0

    init(scheduler: Scheduler) {
        self.scheduler = scheduler
    }

    struct OwnerTasks: Equatable {
        var count = 0
        var sessions: [String: Int] = [:]
    }

    /// Takes the next id.
    mutating func takeID() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }

    /// Adds `task` (whose record is `record`), counting it; ids after it are never given again.
    mutating func add(_ task: DownloadTask, _ record: DownloadTaskRecord) {
        if tasks.updateValue(task, forKey: record.id) == nil {
            // Ids are given in ascending order: almost always an append.
            if let last = order.last, record.id <= last {
                let index = Self.firstIndex(in: order) { $0 < record.id }
                if index == order.count || order[index] != record.id {
                    order.insert(record.id, at: index)
                } else {
                    stale -= 1
                }
            } else {
                order.append(record.id)
            }
        }
        if record.group != 0 { groups[record.group]?.tasks.append(record.id) }
        counted(record, active: record.state.isActive, by: 1)
        nextID = max(nextID, record.id + 1)
    }

    /// Forgets task `record.id` (its scheduling too); false when it was not there. A group whose
    /// last task it was is forgotten with it (`emptiedGroup`).
    mutating func remove(_ record: DownloadTaskRecord) -> Bool {
        scheduler.remove(record.id)
        guard tasks.removeValue(forKey: record.id) != nil else { return false }
        stale += 1
        if stale > 64, stale > order.count / 2 {
            order.removeAll { tasks[$0] == nil }
            stale = 0
        }
        counted(record, active: record.state.isActive, by: -1)
        if record.group != 0, var entry = groups[record.group] {
            entry.tasks.removeAll { $0 == record.id }
            groups[record.group] = entry.tasks.isEmpty ? nil : entry
            if entry.tasks.isEmpty {
                emptiedGroup = entry.record
                scheduler.limit(group: record.group, parallel: 0)
            }
        }
        return true
    }

    /// Up to `limit` tasks whose ids come after `after`, in id order.
    func tasks(after: UInt64, limit: Int) -> [DownloadTask] {
        var found: [DownloadTask] = []
        var index = Self.firstIndex(in: order) { $0 <= after }
        while index < order.count, found.count < limit {
            if let task = tasks[order[index]] { found.append(task) }
            index += 1
        }
        return found
    }

    /// The place of the first id of `ids` (ascending) that `before` does not hold for.
    private static func firstIndex(in ids: [UInt64], where before: (UInt64) -> Bool) -> Int {
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if before(ids[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The group the last `remove` emptied (and forgot), for the caller to report; taken once.
    var emptiedGroup: DownloadGroupRecord?

    /// Adds a group (new, or restored before its tasks).
    mutating func add(_ group: DownloadGroupRecord) {
        groups[group.id] = GroupEntry(record: group)
        scheduler.limit(group: group.id, parallel: group.parallel)
        nextGroupID = max(nextGroupID, group.id + 1)
    }

    func hasActiveTasks(in session: SessionID) -> Bool { activePerSession[session, default: 0] > 0 }

    /// Counts `record` in (`by` 1) or out (-1) of its owner's tasks and sessions.
    mutating func counted(_ record: DownloadTaskRecord, active: Bool, by change: Int) {
        var owner = owners[record.owner] ?? OwnerTasks()
        owner.count += change
        owner.sessions[record.session, default: 0] += change
        if owner.sessions[record.session] == 0 {
            owner.sessions[record.session] = nil
            reportedIdle.remove(record.sessionID)
        }
        owners[record.owner] = owner.count > 0 ? owner : nil
        if active {
            activeChanged(record.sessionID, by: change)
            activeChanged(group: record.group, by: change)
        }
    }

    /// A task of `group` became active (1) or stopped being active (-1); nothing for no group (0).
    mutating func activeChanged(group: UInt64, by change: Int) {
        guard group != 0 else { return }
        let count = activePerGroup[group, default: 0] + change
        activePerGroup[group] = count > 0 ? count : nil
    }

    /// A task of `session` became active (1) or stopped being active (-1).
    mutating func activeChanged(_ session: SessionID, by change: Int) {
        let count = activePerSession[session, default: 0] + change
        activePerSession[session] = count > 0 ? count : nil
        if count > 0 { reportedIdle.remove(session) }
    }

    /// Whether `session` has nothing active and its becoming so is not reported yet; marks it
    /// reported (until a task of it is active again).
    mutating func takeIdle(_ session: SessionID) -> Bool {
        guard !hasActiveTasks(in: session), !reportedIdle.contains(session) else { return false }
        reportedIdle.insert(session)
        return true
    }
}
