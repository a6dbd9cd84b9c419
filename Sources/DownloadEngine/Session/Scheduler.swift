import DownloadModel
/// Which queued tasks may start: a global limit on running transfers and one on the connections
/// they open (a segmented download with `connections` 4 counts four), shared fairly between users
/// (and between the sandboxed apps of a user: `SessionParty`) by connections, a limit of transfers per session (a session is one user's: `SessionID`), and
/// within one user higher priorities first, FIFO within a priority; only tasks the network and
/// power allow (`RunConditions`: nothing offline, only `allow_metered` ones on a metered network,
/// no `requires_ac_power` one on battery, no background one under power-saver). A task whose connections do
/// not all fit starts with the places that are free (its `connections` is a maximum, as aria2's
/// `-x` is), so smaller tasks behind it never pass it for ever; places no queued task can take
/// then go to running tasks that have fewer connections than they asked for (`grow`). A transfer
/// known to be short (its response has at most `SessionManager.Configuration.shortTransfer`
/// bytes to go) still holds its connection but no longer counts against the transfer limits:
/// a thousand small files are not fetched four at a time while connections sit idle. A group's
/// `parallel` caps how many of its files run at once (short ones included). Pure bookkeeping,
/// tested without I/O.
struct Scheduler: Sendable {
    var maxRunning: Int
    var maxRunningPerSession: Int
    var maxConnections: Int
    /// The network and power: only tasks they allow start.
    var conditions = RunConditions()
    var network: NetworkStatus { conditions.network }

    /// Laid out small: a day's worth of queued tasks each hold one (80 bytes).
    fileprivate struct Entry: Sendable {
        let id: UInt64
        let sequence: UInt64
        /// Its group (0: none).
        let group: UInt64
        let session: SessionID
        /// The sandboxed app it belongs to ("" for a host caller's): its `party` with the session's owner.
        let app: String
        /// `earliest_begin` (Unix seconds): not started before.
        var notBefore: UInt64?
        var allowMetered: Bool
        var requiresACPower: Bool
        var background: Bool
        var priority: DownloadOptions.Priority
        /// Connections it opens when it runs (at most `maxConnections`).
        private let places: Int32

        init(
            id: UInt64, session: SessionID, app: String, priority: DownloadOptions.Priority, allowMetered: Bool,
            requiresACPower: Bool, background: Bool, notBefore: UInt64?, weight: Int, sequence: UInt64, group: UInt64
        ) {
            self.id = id
            self.sequence = sequence
            self.group = group
            self.session = session
            self.app = app
            self.notBefore = notBefore
            self.allowMetered = allowMetered
            self.requiresACPower = requiresACPower
            self.background = background
            self.priority = priority
            self.places = Int32(clamping: weight)
        }

        var party: SessionParty { SessionParty(owner: session.owner, app: app) }
        var weight: Int { Int(places) }

        var key: OrderKey { OrderKey(priority: priority, sequence: sequence) }
    }

    /// In the order of `before` (higher priority first, then first come), so a user's first
    /// entry that may start is that user's best: `next` stops looking once every user has one.
    private var queued: [Entry] = []
    /// How many entries of `queued` each session has (kept with `queued`): `next` looks at the
    /// queue only when one of these sessions may start a transfer.
    private var queuedPerSession: [SessionID: Int] = [:]
    /// How many entries of `queued` each party has (kept with `queued`): whose best `next` looks for.
    private var queuedPerParty: [SessionParty: Int] = [:]
    /// A running task: the connections it holds (`weight`), the most it asked for (`wanted`),
    /// and the queue entry it was started from (`ticket`: a task stopped and queued again before
    /// its start took effect is a new entry, so a late start of the old one is told apart).
    private struct Running: Sendable {
        let session: SessionID
        let party: SessionParty
        var weight: Int
        var wanted: Int
        let ticket: UInt64
        let group: UInt64
        /// Known to end soon: counts as a connection, not as a transfer (`markShort`).
        var short = false
    }

    private var running: [UInt64: Running] = [:]
    private var sequence: UInt64 = 0
    /// Groups whose files run at most so many at once (`parallel`), and how many of each run.
    private var groupLimits: [UInt64: Int] = [:]
    private var runningPerGroup: [UInt64: Int] = [:]

    /// Group `group` runs at most `parallel` files at once (0: no limit of its own).
    mutating func limit(group: UInt64, parallel: Int) {
        groupLimits[group] = parallel > 0 ? parallel : nil
    }

    /// How many files of `group` hold a place now.
    func running(inGroup group: UInt64) -> Int { runningPerGroup[group, default: 0] }

    private mutating func forgetRunning(_ id: UInt64) {
        guard let entry = running.removeValue(forKey: id) else { return }
        if entry.group != 0 {
            let left = runningPerGroup[entry.group, default: 1] - 1
            runningPerGroup[entry.group] = left > 0 ? left : nil
        }
    }

    init(maxRunning: Int, maxRunningPerSession: Int, maxConnections: Int = 16) {
        self.maxRunning = max(1, maxRunning)
        self.maxRunningPerSession = max(1, maxRunningPerSession)
        self.maxConnections = max(1, maxConnections)
    }

    /// Transfers counted against `maxRunning` (a short one is not).
    var runningCount: Int { running.values.reduce(0) { $0 + ($1.short ? 0 : 1) } }
    /// Every transfer holding a place, short ones included.
    var transferCount: Int { running.count }
    /// The connections a running task was granted (1 when it is not running).
    func connections(of id: UInt64) -> Int { running[id]?.weight ?? 1 }
    /// The ticket `next` started a task with; nil when it is not running.
    func ticket(of id: UInt64) -> UInt64? { running[id]?.ticket }
    /// Places taken: the connections of the running tasks.
    var connectionCount: Int { running.values.reduce(0) { $0 + $1.weight } }

    /// Queued tasks that wait for a begin time, and that time; `beginOrder` holds the same in
    /// the order of the times, so the next one is found without a scan of a million. A task that
    /// starts or goes leaves `beginTimes` at once and `beginOrder` later (an entry whose time
    /// `beginTimes` no longer has is stale: `staleBeginTimes` counts them, and the order is made
    /// again once they are half of it), so a hundred thousand tasks starting one after another do
    /// not each move the rest of the array.
    private var beginTimes: [UInt64: UInt64] = [:]
    private var beginOrder: [BeginTime] = []
    private var staleBeginTimes = 0
    /// No entry of `beginOrder` before this index is in `notYet`: `admit` goes on from here.
    private var admitFrom = 0
    /// Queued tasks whose begin time has not come (entries of `queued` to be): `next` moves each
    /// in when its time comes, so a look at the queue never passes over a day's worth of tasks.
    /// Kept in an array, with each one's place in it by id (`notYet`): a hundred thousand entries
    /// inline in a dictionary took 294 bytes each with its room to grow, the array and the
    /// places about 150 (Benchmarks/RESULTS.md, issue 61's fourth sitting).
    private var notYetEntries: [Entry] = []
    private var notYet: [UInt64: Int32] = [:]
    /// Where each entry of `queued` is in its order (its priority and sequence): finding one
    /// is a binary search, not a scan.
    private var queuedKeys: [UInt64: OrderKey] = [:]

    private struct BeginTime: Comparable {
        let at: UInt64
        let id: UInt64
        static func < (a: BeginTime, b: BeginTime) -> Bool { a.at != b.at ? a.at < b.at : a.id < b.id }
    }

    /// An entry's place in `queued`: within one user, higher priority first, then first come.
    fileprivate struct OrderKey: Comparable {
        let priority: DownloadOptions.Priority
        let sequence: UInt64
        static func < (a: OrderKey, b: OrderKey) -> Bool {
            a.priority != b.priority ? a.priority > b.priority : a.sequence < b.sequence
        }
    }

    /// `app`: the sandboxed app the task belongs to ("" for a host caller's), its party with its owner.
    mutating func enqueue(
        _ id: UInt64, session: SessionID, app: String = "", priority: DownloadOptions.Priority,
        allowMetered: Bool = true,
        requiresACPower: Bool = false, background: Bool = false, connections: Int = 1, notBefore: UInt64? = nil,
        group: UInt64 = 0
    ) {
        guard running[id] == nil, queuedKeys[id] == nil, notYet[id] == nil else { return }
        sequence += 1
        let entry = Entry(
            id: id, session: session, app: app, priority: priority,
            allowMetered: allowMetered, requiresACPower: requiresACPower, background: background, notBefore: notBefore,
            weight: max(1, min(connections, maxConnections)), sequence: sequence, group: group
        )
        if let notBefore {
            beginTimes[id] = notBefore
            let time = BeginTime(at: notBefore, id: id)
            let index = Scheduler.firstIndex(in: beginOrder) { $0 < time }
            beginOrder.insert(time, at: index)
            if notBefore > WallClock.now {
                notYet[id] = Int32(notYetEntries.count)
                notYetEntries.append(entry)
                admitFrom = min(admitFrom, index)
                return
            }
            if index < admitFrom { admitFrom += 1 }
        }
        insert(entry)
    }

    /// Takes task `id`'s entry out of `notYet` (the last entry takes its place in the array).
    private mutating func takeNotYet(_ id: UInt64) -> Entry? {
        guard let place = notYet.removeValue(forKey: id) else { return nil }
        let index = Int(place)
        let entry = notYetEntries[index]
        let last = notYetEntries.removeLast()
        if index < notYetEntries.count {
            notYetEntries[index] = last
            notYet[last.id] = place
        } else if notYetEntries.isEmpty {
            notYetEntries = []  // the room a day's worth of tasks took goes back
        }
        return entry
    }

    /// Puts `entry` in `queued` at its place in the order of `before` (a binary search: the
    /// usual new entry, the last to come, goes after every entry of its priority or higher),
    /// counting it.
    private mutating func insert(_ entry: Entry) {
        queued.insert(entry, at: Scheduler.firstIndex(in: queued) { $0.key < entry.key })
        queuedKeys[entry.id] = entry.key
        queuedPerSession[entry.session, default: 0] += 1
        queuedPerParty[entry.party, default: 0] += 1
    }

    /// The first index of `array` whose element `comesBefore` is false for (it is true for a
    /// prefix of `array` and false for the rest): a binary search.
    private static func firstIndex<T>(in array: [T], where comesBefore: (T) -> Bool) -> Int {
        var low = 0, high = array.count
        while low < high {
            let middle = (low + high) / 2
            if comesBefore(array[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The index in `queued` of task `id`, if it is there.
    private func queuedIndex(of id: UInt64) -> Int? {
        guard let key = queuedKeys[id] else { return nil }
        let index = Scheduler.firstIndex(in: queued) { $0.key < key }
        return index < queued.count && queued[index].id == id ? index : nil
    }

    /// Moves the entries whose begin time has come by `now` into `queued` (each once: `admitFrom`
    /// passes it).
    private mutating func admit(by now: UInt64) {
        guard !notYet.isEmpty else { return }
        while admitFrom < beginOrder.count, beginOrder[admitFrom].at <= now {
            if let entry = takeNotYet(beginOrder[admitFrom].id) { insert(entry) }
            admitFrom += 1
        }
    }

    /// Whether `time` is still a queued task's begin time (not a stale entry of `beginOrder`).
    private func isCurrent(_ time: BeginTime) -> Bool { beginTimes[time.id] == time.at }

    /// Forgets task `id`'s begin time; its entry in `beginOrder` goes stale.
    private mutating func forgetBeginTime(_ id: UInt64) {
        guard beginTimes.removeValue(forKey: id) != nil else { return }
        staleBeginTimes += 1
        guard staleBeginTimes > 64, staleBeginTimes * 2 > beginOrder.count else { return }
        beginOrder = beginTimes.map { BeginTime(at: $0.value, id: $0.key) }.sorted()
        staleBeginTimes = 0
        admitFrom = beginOrder.firstIndex { notYet[$0.id] != nil } ?? beginOrder.count
    }

    /// A task as its record says: its session, app and options.
    mutating func enqueue(_ record: DownloadTaskRecord) {
        let options = record.options
        enqueue(
            record.id, session: record.sessionID, app: record.app, priority: options.priority,
            allowMetered: options.allowMetered,
            requiresACPower: options.requiresACPower, background: options.background, connections: options.connections,
            notBefore: options.earliestBegin, group: record.group
        )
    }

    /// Queued tasks whose begin time has come by `now` and that have not started yet.
    func beginTimesCome(by now: UInt64) -> [UInt64] {
        beginOrder.prefix { $0.at <= now }.filter(isCurrent).map(\.id)
    }

    /// The earliest begin time after `now` of a queued task (when to look again), if any.
    func nextBeginTime(after now: UInt64) -> UInt64? {
        let time = BeginTime(at: now, id: .max)
        return beginOrder[Scheduler.firstIndex(in: beginOrder) { $0 < time }...].first(where: isCurrent)?.at
    }

    /// A queued task's options changed (its priority moves it within the order).
    mutating func update(_ id: UInt64, _ options: DownloadOptions) {
        func changed(_ entry: inout Entry) {
            entry.priority = options.priority
            entry.allowMetered = options.allowMetered
            entry.requiresACPower = options.requiresACPower
            entry.background = options.background
        }
        if let place = notYet[id] {
            changed(&notYetEntries[Int(place)])
            return
        }
        guard let index = queuedIndex(of: id) else { return }
        var entry = dequeue(at: index)
        changed(&entry)
        insert(entry)
    }

    /// Forgets a task, queued or running.
    mutating func remove(_ id: UInt64) {
        if let index = queuedIndex(of: id) { dequeue(at: index) }
        _ = takeNotYet(id)
        forgetRunning(id)
        forgetBeginTime(id)
    }

    /// Forgets a start that did not take effect, unless the task runs under another ticket now.
    mutating func remove(_ id: UInt64, ticket: UInt64) {
        guard running[id]?.ticket == ticket else { return }
        forgetRunning(id)
    }

    /// The tasks to start now, marked running. Places are shared fairly between users: each free
    /// place goes to the user with the fewest running connections who has a task that may start
    /// (ties: whoever has waited longest), so one user's thousand tasks never keep another's
    /// from starting; priority then FIFO order only that user's own tasks.
    mutating func next(now: UInt64 = WallClock.now) -> [UInt64] {
        var started: [UInt64] = []
        admit(by: now)
        guard network.online, !queued.isEmpty else { return started }
        // Tallies made once and kept up to date as tasks start (this runs for every change of
        // every task: with a thousand small files, once per event; see Benchmarks/RESULTS.md).
        var runningPerSession: [SessionID: Int] = [:]
        var runningPerOwner: [SessionParty: Int] = [:]
        var transfers = 0
        var connections = 0
        for entry in running.values {
            if !entry.short {
                runningPerSession[entry.session, default: 0] += 1
                transfers += 1
            }
            runningPerOwner[entry.party, default: 0] += entry.weight
            connections += entry.weight
        }
        // The users with queued tasks: the scan ends once each has its best.
        let owners = queuedPerParty.count
        while transfers < maxRunning && connections < maxConnections && !queued.isEmpty {
            // With many tasks queued in sessions at their limit (a thousand small files), most
            // calls end here without a look at the queue.
            guard queuedPerSession.contains(where: { runningPerSession[$0.key, default: 0] < maxRunningPerSession })
            else { break }
            let free = maxConnections - connections
            // Each user's best task that may start now (an index into `queued`): the first of
            // theirs that may, in the queue's order. Consecutive entries are mostly of one
            // session: its verdict is reused rather than hashed again.
            var best: [SessionParty: Int] = [:]
            var lastSession: SessionID?
            var lastSessionMayRun = false
            for index in queued.indices {
                let session = queued[index].session
                if session != lastSession {
                    lastSession = session
                    lastSessionMayRun = runningPerSession[session, default: 0] < maxRunningPerSession
                }
                guard lastSessionMayRun, best[queued[index].party] == nil, conditions.allows(queued[index]),
                    (queued[index].notBefore ?? 0) <= now
                else { continue }
                let group = queued[index].group
                if group != 0, let limit = groupLimits[group], runningPerGroup[group, default: 0] >= limit { continue }
                best[queued[index].party] = index
                if best.count == owners { break }
            }
            let chosen = best.values.min { a, b in
                let ra = runningPerOwner[queued[a].party, default: 0], rb = runningPerOwner[queued[b].party, default: 0]
                return ra != rb ? ra < rb : queued[a].sequence < queued[b].sequence
            }
            guard let index = chosen else { break }
            let entry = dequeue(at: index)
            let weight = min(entry.weight, free)
            running[entry.id] = Running(
                session: entry.session, party: entry.party, weight: weight, wanted: entry.weight,
                ticket: entry.sequence, group: entry.group
            )
            if entry.group != 0 { runningPerGroup[entry.group, default: 0] += 1 }
            forgetBeginTime(entry.id)
            runningPerSession[entry.session, default: 0] += 1
            runningPerOwner[entry.party, default: 0] += weight
            transfers += 1
            connections += weight
            started.append(entry.id)
        }
        return started
    }

    /// Places left after `next` (no queued task can take them: the transfer limits or the
    /// network hold those back) go, one at a time, to the running task with fewer connections
    /// than it asked for whose user holds the fewest (ties: the oldest task). Returns the places
    /// each task gained; the caller hands them to its run and gives back what it cannot use.
    mutating func grow() -> [UInt64: Int] {
        var granted: [UInt64: Int] = [:]
        var free = maxConnections - connectionCount
        var perOwner: [SessionParty: Int] = [:]
        for entry in running.values { perOwner[entry.party, default: 0] += entry.weight }
        while free > 0 {
            let candidate = running.filter { $0.value.weight < $0.value.wanted }.min { a, b in
                let ra = perOwner[a.value.party, default: 0], rb = perOwner[b.value.party, default: 0]
                return ra != rb ? ra < rb : a.key < b.key
            }
            guard let (id, entry) = candidate else { break }
            running[id]?.weight += 1
            perOwner[entry.party, default: 0] += 1
            granted[id, default: 0] += 1
            free -= 1
        }
        return granted
    }

    /// A running task gives back `count` places it was granted but cannot use now; with
    /// `forGood`, it will not use them in this run either (its sources' servers have their
    /// connections), so they are not offered to it again.
    mutating func giveBack(_ id: UInt64, _ count: Int, forGood: Bool = false) {
        guard let entry = running[id] else { return }
        running[id]?.weight = max(1, entry.weight - count)
        if forGood { running[id]?.wanted = max(1, entry.wanted - count) }
    }

    /// Places taken back for users who wait. When a task that may start waits only for
    /// connection places (fewer transfers run than `maxRunning`) and a user holds more than an
    /// equal share of the places (`maxConnections` over the users running or waiting), that
    /// user's largest task gives back one place (it keeps one) for each waiting user below the
    /// share; `next` then starts the waiting users' tasks. A user alone, or users within their
    /// share, keep what they have. Returns the places each task gives back: its run ends that
    /// many connections (their ranges go to its others).
    mutating func reclaim(now: UInt64 = WallClock.now) -> [UInt64: Int] {
        admit(by: now)
        guard network.online, !queued.isEmpty, connectionCount >= maxConnections, runningCount < maxRunning else {
            return [:]
        }
        var runningPerSession: [SessionID: Int] = [:]
        var held: [SessionParty: Int] = [:]
        for entry in running.values {
            if !entry.short { runningPerSession[entry.session, default: 0] += 1 }
            held[entry.party, default: 0] += entry.weight
        }
        // A party alone (a thousand small files of one user) keeps every place: no look at the queue.
        guard queuedPerParty.keys.contains(where: { held[$0] == nil }) || held.count > 1 else { return [:] }
        var waiting = Set<SessionParty>()
        for entry in queued where !waiting.contains(entry.party) {
            if runningPerSession[entry.session, default: 0] < maxRunningPerSession, conditions.allows(entry),
                (entry.notBefore ?? 0) <= now,
                entry.group == 0 || runningPerGroup[entry.group, default: 0] < groupLimits[entry.group, default: .max]
            {
                waiting.insert(entry.party)
                if waiting.count == queuedPerParty.count { break }
            }
        }
        let share = max(1, maxConnections / max(1, Set(held.keys).union(waiting).count))
        var taken: [UInt64: Int] = [:]
        for owner in waiting.sorted() where held[owner, default: 0] < share {
            // The user most over the share, and their task with the most places.
            guard let (richest, places) = held.filter({ $0.key != owner }).max(by: { $0.value < $1.value }),
                places > share,
                let (id, _) = running.filter({ $0.value.party == richest && $0.value.weight > 1 })
                    .max(by: {
                        $0.value.weight != $1.value.weight ? $0.value.weight < $1.value.weight : $0.key > $1.key
                    })
            else { continue }
            running[id]?.weight -= 1
            held[richest, default: 0] -= 1
            taken[id, default: 0] += 1
        }
        return taken
    }

    /// A task could not end the connections `reclaim` took: it holds those places again.
    mutating func regrant(_ id: UInt64, _ count: Int) {
        running[id]?.weight += count
    }

    /// A running task will end soon (a small file): it keeps its connection and frees its
    /// transfer place, here and in its session. Returns whether that changed anything.
    @discardableResult
    mutating func markShort(_ id: UInt64) -> Bool {
        guard let entry = running[id], !entry.short else { return false }
        running[id]?.short = true
        return true
    }

    /// A running task may use `connections` from now on (it followed a Metalink document with
    /// mirrors): offered more places as they free up, as if it had asked for them at the start.
    mutating func want(_ id: UInt64, connections: Int) {
        guard let entry = running[id] else { return }
        running[id]?.wanted = max(entry.wanted, connections)
    }

    /// A running task that fetches on one stream from now on keeps one place and is offered
    /// no more.
    mutating func settle(_ id: UInt64) {
        guard running[id] != nil else { return }
        running[id]?.weight = 1
        running[id]?.wanted = 1
    }

    @discardableResult
    private mutating func dequeue(at index: Int) -> Entry {
        let entry = queued.remove(at: index)
        queuedKeys[entry.id] = nil
        let left = (queuedPerSession[entry.session] ?? 1) - 1
        queuedPerSession[entry.session] = left > 0 ? left : nil
        let partyLeft = (queuedPerParty[entry.party] ?? 1) - 1
        queuedPerParty[entry.party] = partyLeft > 0 ? partyLeft : nil
        return entry
    }

}

private extension RunConditions {
    func allows(_ entry: Scheduler.Entry) -> Bool {
        allows(allowMetered: entry.allowMetered, requiresACPower: entry.requiresACPower, background: entry.background)
    }
}
