import AsyncHTTPClient
import Crypto
import Logging
import NIOConcurrencyHelpers
import NIOCore
import UserFiles

/// Owns the HTTP client, the task table (id → task) and the scheduler, and reports every event
/// through its `SessionDelegate`. Knows nothing of D-Bus. Owns every partial file: creating,
/// adopting (from resume data), removing; nobody else touches them.
///
/// Locks and queues (the one place they are written down):
/// 1. `DownloadTask.eventOrder`: held while a task changes and its events are queued.
/// 2. `SessionManager.state`: the task table, the scheduler, the next id.
/// 3. `DownloadTask.state`: one task's record and counters.
/// (0. `PartialFileWriter.generation`, held while a finished checkpoint sync is recorded.)
/// A thread holding one may take a later one, never an earlier one; each is held only for
/// bookkeeping (no I/O, no waiting, no observer code). Observers run on each task's `events`
/// queue; file calls on each task's `io` queue (through `PartialFileWriter`); the event loops
/// of the HTTP client only parse, hand buffers to the writer and take locks 1–3 briefly.
public final class SessionManager: Sendable {
    public struct Configuration: Sendable {
        public var maxRunning = 4
        public var maxRunningPerSession = 2
        /// Connections all running transfers may open together (segmented ones open several).
        public var maxConnections = 16
        public var retry = RetryPolicy()
        public var connectTimeout: Double = 30
        public var stallTimeout: Double = 60
        /// A transfer below `lowSpeedLimit` bytes a second for `lowSpeedTime` seconds ends as
        /// `Timeout` and is retried: a server that drips a byte every few seconds never trips
        /// the stall timeout. curl's `--speed-limit 1 --speed-time 60` shape; 0 turns it off.
        public var lowSpeedLimit: UInt64 = 1
        public var lowSpeedTime: Double = 60
        /// A running transfer is checkpointed every `checkpointInterval` seconds, or sooner once
        /// `checkpointBytes` arrived: a crash costs at most about a second of transfer, and a fast
        /// one is not held to a SQLite commit and an fdatasync every few megabytes.
        public var checkpointBytes: Int64 = 64 * 1024 * 1024
        public var checkpointInterval: Double = 1
        public var maxRedirects = 10
        /// A segmented download splits no range below this (aria2's `--min-split-size`).
        public var minimumSegment: Int64 = 1 << 20
        /// Networks that tasks of owners other than root may not reach: every hop's address is
        /// checked at connect time and the connection pinned to a checked address.
        public var deniedNetworks: [NetworkRange] = []
        /// Certificates (PEM) trusted beside the system store: an administrator's flag, never a caller's.
        public var caFile: String?
        public init() {}
    }

    struct State {
        var tasks: [UInt64: DownloadTask] = [:]
        /// Per owner: how many tasks, in which sessions (name → tasks). Kept with `tasks`, so
        /// Start's quota checks cost the same with ten thousand tasks as with ten.
        var owners: [UInt32: OwnerTasks] = [:]
        /// Queued, running or retrying tasks per session (for "the session has nothing left to do").
        var activePerSession: [SessionID: Int] = [:]
        var scheduler: Scheduler
        var nextID: UInt64 = 1
        var shuttingDown = false
        /// Counts the moments connections may work again (wake-up, the network back): a retry
        /// waiting for its delay goes at once when this changes.
        var reconnectGeneration: UInt64 = 0
    }

    struct OwnerTasks {
        var count = 0
        var sessions: [String: Int] = [:]
    }

    let configuration: Configuration
    let clients: HTTPClients
    public let delegate: SessionDelegate
    let files: any FileAccessProvider
    private let keyBytes: [UInt8]
    var key: SymmetricKey { SymmetricKey(data: keyBytes) }
    let logger: Logger
    let state: NIOLockedValueBox<State>

    public init(
        configuration: Configuration = Configuration(), resumeDataKey: SymmetricKey,
        files: any FileAccessProvider = DirectFileAccess(), delegate: SessionDelegate = SessionDelegate(),
        logger: Logger = Logger(label: "downloads.engine")
    ) {
        self.configuration = configuration
        self.keyBytes = resumeDataKey.withUnsafeBytes { Array($0) }
        self.files = files
        self.delegate = delegate
        self.logger = logger
        clients = HTTPClients(
            connectTimeout: configuration.connectTimeout, caFile: configuration.caFile,
            connectionsPerHost: configuration.maxConnections
        )
        state = NIOLockedValueBox(State(
            scheduler: Scheduler(
                maxRunning: configuration.maxRunning, maxRunningPerSession: configuration.maxRunningPerSession,
                maxConnections: configuration.maxConnections
            )
        ))
    }

    // MARK: Connections

    /// The client for one request of `owner` (see `HTTPClients`): a shared one; or, when the
    /// owner's downloads are held to `deniedNetworks`, one pinned to an address of the host
    /// outside them. The caller hands the lease back to `clients` after its request.
    func client(_ kind: HTTPClients.Kind, for owner: UInt32, host: String, port: Int) async throws -> HTTPClients.Lease {
        let denied = configuration.deniedNetworks
        guard owner != 0, !denied.isEmpty else { return clients.lease(kind) }
        func deniedRange(_ address: String) -> NetworkRange? { denied.first { $0.contains(address) } }
        if NetworkRange.parse(host) != nil {
            if let range = deniedRange(host) {
                throw DownloadError.accessDenied("\(host) is in a network this service does not reach for you (\(range))")
            }
            return clients.lease(kind)
        }
        let addresses = try await AddressResolver.resolve(host, port: port)
        guard let allowed = addresses.first(where: { deniedRange($0) == nil }) else {
            let ranges = Set(addresses.compactMap { deniedRange($0)?.description }).sorted().joined(separator: ", ")
            throw DownloadError.accessDenied("every address of \(host) is in a network this service does not reach for you (\(ranges))")
        }
        return clients.lease(kind, owner: owner, host: host, port: port, address: allowed)
    }

    // MARK: Tasks

    /// Takes back the tasks of an earlier run (from the store): active ones are queued, others
    /// kept as they are. No `taskWasCreated` is reported for them. New ids start after `nextID - 1`.
    public func restore(_ records: [DownloadTaskRecord], nextID: UInt64) {
        state.withLockedValue { $0.nextID = max($0.nextID, nextID) }
        for var record in records {
            if record.state == .running || record.state == .retrying { record.state = .queued }
            let task = DownloadTask(record: record)
            state.withLockedValue { state in
                state.tasks[record.id] = task
                state.counted(record, active: record.state.isActive, by: 1)
                state.nextID = max(state.nextID, record.id + 1)
                if record.state == .queued {
                    state.scheduler.enqueue(record.id, session: record.sessionID, options: record.options)
                    let network = state.scheduler.network
                    task.update { $0.wait(on: network) }
                }
            }
        }
        schedule()
    }

    /// A new task: gets the next id, is reported (`taskWasCreated`) and queued.
    @discardableResult
    public func create(_ request: DownloadRequest) throws -> TaskSnapshot {
        try request.options.validate()
        return insert { id in DownloadTaskRecord(id: id, request: request) }
    }

    private func insert(_ makeRecord: (UInt64) -> DownloadTaskRecord) -> TaskSnapshot {
        let task = state.withLockedValue { state -> DownloadTask in
            let record = makeRecord(state.nextID)
            state.nextID += 1
            let task = DownloadTask(record: record)
            state.tasks[record.id] = task
            state.counted(record, active: record.state.isActive, by: 1)
            return task
        }
        let snapshot = task.eventOrder.withLock {
            let network = state.withLockedValue { $0.scheduler.network }
            let snapshot = task.update { $0.wait(on: network) }
            delegate.created(task, snapshot)
            state.withLockedValue { state in
                if snapshot.state == .queued {
                    state.scheduler.enqueue(snapshot.id, session: snapshot.sessionID, options: snapshot.record.options)
                }
            }
            return snapshot
        }
        schedule()
        return snapshot
    }

    /// Start's checks on a destination, made with the owner's credentials (a path the owner
    /// cannot reach answers like a missing one): returns whether it is a directory; a file needs
    /// an existing directory, and `overwrite` when it exists. Blocks on the owner's file helper.
    public func checkDestination(_ path: String, overwrite: Bool, owner: UInt32) throws -> Bool {
        let access = files.files(for: owner)
        let isDirectory = try access.isDirectory(path)
        let directory = isDirectory ? path : FilePaths.directory(of: path)
        let directoryExists = try isDirectory || access.isDirectory(directory)
        guard directoryExists else {
            throw DownloadError.invalidArgument("the directory of \(path) does not exist")
        }
        guard try access.isWritableDirectory(directory) else {
            throw DownloadError.file("you cannot create files in \(directory)")
        }
        if !isDirectory, try access.exists(path), !overwrite { throw DownloadError.fileExists(path) }
        return isDirectory
    }

    public func snapshot(_ id: UInt64) -> TaskSnapshot? {
        state.withLockedValue { $0.tasks[id] }?.snapshot
    }

    public func snapshots() -> [TaskSnapshot] {
        state.withLockedValue { Array($0.tasks.values) }.map(\.snapshot).sorted { $0.id < $1.id }
    }

    public func snapshots(owner: UInt32) -> [TaskSnapshot] {
        snapshots().filter { $0.owner == owner }
    }

    /// Returns once every event of task `id` reported so far has reached the observers (the
    /// store has written it): what a caller waits for before telling a client the task exists.
    public func eventsDelivered(_ id: UInt64) async {
        guard let task = state.withLockedValue({ $0.tasks[id] }) else { return }
        await task.eventsDelivered()
    }

    private func task(_ id: UInt64) throws -> DownloadTask {
        guard let task = state.withLockedValue({ $0.tasks[id] }) else {
            throw DownloadError.notFound("no task \(id)")
        }
        return task
    }

    /// Stops a task, keeps its partial file, and returns resume data for it. Pausing a paused
    /// task just returns its resume data again.
    public func pause(_ id: UInt64) async throws -> [UInt8] {
        let task = try task(id)
        if task.snapshot.state != .paused {
            try await stop(task, reason: .pause)
        }
        return try resumeData(for: id)
    }

    /// Puts a paused or failed task back in the queue; it continues from its durable offset.
    public func resume(_ id: UInt64) throws {
        let task = try task(id)
        let moved = move(task, to: .queued, from: [.paused, .failed], { state in
            state.record.errorName = nil
            state.record.errorMessage = nil
            state.stopReason = nil
        }, then: { [self] _, _, snapshot in
            state.withLockedValue {
                $0.scheduler.enqueue(id, session: snapshot.sessionID, options: snapshot.record.options)
            }
        })
        guard moved != nil else {
            throw DownloadError.wrongState("task \(id) is \(task.snapshot.state); only paused or failed tasks can be resumed")
        }
        schedule()
    }

    /// Changes the options a live task may change (priority, bandwidth limit, metered).
    /// A running transfer picks up a new limit within a second; one that may no longer use the
    /// network it is on goes back to the queue, and a queued one that now may starts.
    @discardableResult
    public func changeOptions(_ id: UInt64, _ change: DownloadOptions.Change) throws -> TaskSnapshot {
        let task = try task(id)
        guard !change.isEmpty else { return task.snapshot }
        let snapshot = task.eventOrder.withLock {
            let network = state.withLockedValue { $0.scheduler.network }
            let before = task.snapshot.waitingFor
            let snapshot = task.update { state in
                state.record.options.apply(change)
                state.wait(on: network)
            }
            delegate.optionsChanged(task, snapshot)
            if snapshot.waitingFor != before { delegate.waitingChanged(task, snapshot) }
            state.withLockedValue { $0.scheduler.update(snapshot.id, snapshot.record.options) }
            return snapshot
        }
        if snapshot.state.holdsTransfer, !network.allows(allowMetered: snapshot.record.options.allowMetered) {
            Task { try? await stop(task, reason: .wait) }
        }
        schedule()
        return snapshot
    }

    // MARK: The network and sleep

    /// What the network allows now (from NetworkManager). Transfers it no longer allows are
    /// checkpointed and go back to the queue (`WaitingFor` says why), instead of burning their
    /// retries; queued ones it allows start. Returns once those transfers have stopped.
    public func setNetwork(_ network: NetworkStatus) async {
        let (changed, tasks) = state.withLockedValue { state -> (Bool, [DownloadTask]) in
            let changed = state.scheduler.network != network
            state.scheduler.network = network
            return (changed, Array(state.tasks.values))
        }
        guard changed else { return }
        logger.info("network: \(network)")
        if network.online { reconnectNow() }
        var stopping: [DownloadTask] = []
        for task in tasks {
            task.eventOrder.withLock {
                let (before, snapshot) = task.state.withLockedValue { state -> (WaitingFor, TaskSnapshot) in
                    let before = state.waitingFor
                    state.wait(on: network)
                    return (before, state.snapshot)
                }
                if snapshot.state == .queued, snapshot.waitingFor != before { delegate.waitingChanged(task, snapshot) }
                if snapshot.state.holdsTransfer, !network.allows(allowMetered: snapshot.record.options.allowMetered) {
                    stopping.append(task)
                }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for task in stopping {
                group.addTask { try? await self.stop(task, reason: .wait) }
            }
        }
        schedule()
    }

    public var network: NetworkStatus { state.withLockedValue { $0.scheduler.network } }

    /// Connections may work again (the machine woke up): transfers waiting to retry do it now
    /// instead of sitting out their back-off.
    public func reconnectNow() {
        state.withLockedValue { $0.reconnectGeneration += 1 }
    }

    var reconnectGeneration: UInt64 { state.withLockedValue { $0.reconnectGeneration } }

    /// Transfers holding a place now (running, or retrying after a pause).
    public var transfersRunning: Int { state.withLockedValue { $0.scheduler.runningCount } }

    /// Makes every running transfer durable now (fdatasync, then the offset recorded and
    /// delivered to the observers) without stopping it: what happens before the machine sleeps.
    public func checkpointTransfers() async {
        let runs = state.withLockedValue { Array($0.tasks.values) }.compactMap { task in
            task.state.withLockedValue { $0.transfer }
        }
        await withTaskGroup(of: Void.self) { group in
            for run in runs {
                group.addTask {
                    await run.checkpoint()
                    await run.task.eventsDelivered()
                }
            }
        }
    }

    /// Stops a task and removes its partial file.
    public func cancel(_ id: UInt64) async throws {
        let task = try task(id)
        try await stop(task, reason: .cancel)
    }

    /// Forgets a task that is paused or has ended, removing its partial file unless
    /// `keepingPartialFile` (a failed task's partial file is what Resume needs).
    public func remove(_ id: UInt64, keepingPartialFile: Bool = false) async throws {
        let task = try task(id)
        let removed: TaskSnapshot? = try task.eventOrder.withLock {
            let snapshot = task.snapshot
            guard snapshot.state.isTerminal || snapshot.state == .paused else {
                throw DownloadError.wrongState("task \(id) is \(snapshot.state); cancel it first")
            }
            let wasThere = state.withLockedValue { state -> Bool in
                state.scheduler.remove(id)
                guard state.tasks.removeValue(forKey: id) != nil else { return false }
                state.counted(snapshot.record, active: snapshot.state.isActive, by: -1)
                return true
            }
            guard wasThere else { return nil }
            delegate.removed(task, snapshot)
            return snapshot
        }
        guard removed != nil else { throw DownloadError.notFound("no task \(id)") }
        if !keepingPartialFile { await removePartialFile(of: task) }
        await task.eventsDelivered()
    }

    /// Resume data for a paused or failed task that holds a resumable partial download.
    public func resumeData(for id: UInt64) throws -> [UInt8] {
        let record = try task(id).record
        guard record.state == .paused || record.state == .failed || record.state == .queued else {
            throw DownloadError.wrongState("task \(id) is \(record.state)")
        }
        return try ResumeData(record: record).encoded(key: key)
    }

    /// Verifies a blob made by this engine for `owner`.
    public func decodeResumeData(_ blob: [UInt8], owner: UInt32) throws -> ResumeData {
        try ResumeData.decode(blob, key: key, owner: owner)
    }

    /// `ResumeWithData`: the task the data came from, if it still exists, gets `change` and is
    /// resumed (a paused or failed one) or left running; otherwise a new task takes over the
    /// old one's partial file when it is still there, or starts from zero when it is not.
    public func adopt(_ data: ResumeData, change: DownloadOptions.Change, fileMode: UInt32? = nil) async throws -> TaskSnapshot {
        if let existing = state.withLockedValue({ $0.tasks[data.taskID] }), existing.record.owner == data.owner {
            switch existing.snapshot.state {
            case .paused, .failed:
                try changeOptions(data.taskID, change)
                try resume(data.taskID)
                return existing.snapshot
            case .queued, .running, .retrying:
                return try changeOptions(data.taskID, change)
            case .finished, .cancelled:
                break
            }
        }
        var request = data.request
        request.fileMode = fileMode
        request.options.apply(change)
        try request.options.validate()
        let id = state.withLockedValue { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        var record = DownloadTaskRecord(id: id, request: request)
        let old = DownloadTaskRecord(id: data.taskID, request: data.request)
        let access = files.files(for: record.owner)
        let source = old.partialPath, target = record.partialPath
        var adopted = false
        if data.offset > 0, data.validator != nil {
            // Only a regular file of the owner with one link is taken over (publish checks).
            adopted = (try? await DownloadTask(record: record).onIOQueue {
                guard try access.exists(source) else { return false }
                try access.publish(source, identity: nil, to: target, replace: true, mode: nil)
                return true
            }) == true
        }
        if adopted {
            record.durableOffset = data.offset
            record.validator = data.validator
            record.segments = data.segments
            record.expectedLength = data.expectedLength
            record.finalURL = data.finalURL
            record.resolvedPath = data.resolvedPath
        }
        let fixed = record
        return insert { _ in fixed }
    }

    /// Stops every transfer (checkpointing it) and leaves active tasks queued for the next start.
    public func shutdown() async {
        let tasks = state.withLockedValue { state -> [DownloadTask] in
            state.shuttingDown = true
            return Array(state.tasks.values)
        }
        for task in tasks where task.snapshot.state.isActive {
            try? await stop(task, reason: .shutdown)
        }
        for task in tasks { await task.eventsDelivered() }
        await clients.shutdown()
    }

    /// Whether `session` still has a queued, running or retrying task.
    public func hasActiveTasks(in session: SessionID) -> Bool {
        state.withLockedValue { $0.activePerSession[session, default: 0] > 0 }
    }

    public func taskCount(owner: UInt32) -> Int {
        state.withLockedValue { $0.owners[owner]?.count ?? 0 }
    }

    /// The names of the sessions `owner`'s tasks are in.
    public func sessionNames(owner: UInt32) -> Set<String> {
        state.withLockedValue { Set(($0.owners[owner]?.sessions ?? [:]).keys) }
    }

    // MARK: Stopping

    private func stop(_ task: DownloadTask, reason: DownloadTask.StopReason) async throws {
        enum Plan { case direct(from: DownloadState, to: DownloadState), wait(Task<Void, Never>?) }
        while true {
            let plan: Plan = try task.state.withLockedValue { state in
                let current = state.record.state
                switch (current, reason) {
                case (.queued, .pause), (.queued, .cancel), (.paused, .cancel), (.failed, .cancel):
                    return .direct(from: current, to: reason == .pause ? .paused : .cancelled)
                case (.queued, .shutdown):
                    return .wait(nil)
                case (.running, _), (.retrying, _):
                    state.stopReason = reason
                    for cancel in state.requests.values { cancel() }
                    state.runner?.cancel()
                    return .wait(state.runner)
                default:
                    throw DownloadError.wrongState("task \(task.id) is \(current)")
                }
            }
            switch plan {
            case .direct(let current, let next):
                // Only from the state planned for: the scheduler may have started the queued task
                // since, and a run is stopped by its runner, never by relabelling it.
                // Leaving the queue in the same step: a start the scheduler picked it for and
                // has not made yet is refused by its ticket.
                let moved = move(task, to: next, from: [current], then: { [self] delegate, task, snapshot in
                    state.withLockedValue { $0.scheduler.remove(task.id) }
                    if next == .cancelled { delegate.completed(task, snapshot, error: .cancelled, resumeData: nil) }
                })
                guard let snapshot = moved else { continue }
                if next == .cancelled { await removePartialFile(of: task) }
                sessionMayBeIdle(task, snapshot.sessionID)
            case .wait(let runner):
                await runner?.value
            }
            return
        }
    }

    /// Removes a task's partial file on its I/O queue (after any write still queued there).
    func removePartialFile(of task: DownloadTask) async {
        let path = task.record.partialPath
        let access = files.files(for: task.record.owner)
        do {
            try await task.onIOQueue { try access.remove(path) }
        } catch {
            logger.warning("task \(task.id): \(error)")
        }
    }

    // MARK: Scheduling

    /// Starts what the scheduler lets start; with `growing`, then hands places no queued task
    /// can take to segmented runs short of their connections.
    func schedule(growing: Bool = true) {
        typealias Start = (task: DownloadTask, connections: Int, ticket: UInt64)
        let (starting, grown) = state.withLockedValue { state -> ([Start], [(DownloadTask, Int)]) in
            guard !state.shuttingDown else { return ([], []) }
            let starting = state.scheduler.next().compactMap { id in
                state.tasks[id].map { Start($0, state.scheduler.connections(of: id), state.scheduler.ticket(of: id) ?? 0) }
            }
            let grown = growing ? state.scheduler.grow().compactMap { id, count in state.tasks[id].map { ($0, count) } } : []
            return (starting, grown)
        }
        var freed = false
        for (task, connections, ticket) in starting {
            // The runner is stored under the task's lock, so a stop never misses it; its own
            // events wait for this one (move holds the task's event order). Only while the
            // scheduler still counts this start: a stop since (and a resume that queued the task
            // again) took it back in the same event order.
            let moved = move(task, to: .running, from: [.queued], provided: { $0.ticket(of: task.id) == ticket }, { state in
                state.stopReason = nil
                state.runID += 1
                let runID = state.runID
                state.runner = Task { await self.run(task, runID: runID, connections: connections) }
            })
            if moved == nil {
                // Stopped between the scheduler's pick and here: its places are free again, and
                // whoever stopped it may have looked for work while they still looked taken.
                state.withLockedValue { $0.scheduler.remove(task.id, ticket: ticket) }
                freed = true
            }
        }
        var gaveBack = false
        for (task, count) in grown {
            let taken = task.state.withLockedValue { $0.transfer }?.addConnections(count) ?? 0
            if taken < count {
                state.withLockedValue { $0.scheduler.giveBack(task.id, count - taken) }
                gaveBack = true
            }
            if taken > 0 { logger.info("task \(task.id): \(taken) more connection(s)") }
        }
        // A task queued meanwhile may have found those places taken: it may start now (without
        // offering places given back to the runs that just refused them).
        if freed || gaveBack { schedule(growing: !gaveBack) }
    }

    /// A run that fetches on one stream from now on gives back all but one of its places.
    func settleOnOneStream(_ task: DownloadTask) {
        let freed = state.withLockedValue { state -> Bool in
            let held = state.scheduler.connections(of: task.id)
            state.scheduler.settle(task.id)
            return held > 1
        }
        if freed { schedule() }
    }

    private func run(_ task: DownloadTask, runID: UInt64, connections: Int) async {
        await TransferRun(task: task, manager: self, connections: connections).run()
        // The scheduler let go of the task when it left running (in `move`); a new run may
        // have started since: its handles are not ours to clear.
        task.update { state in
            guard state.runID == runID else { return }
            state.runner = nil
            state.requests = [:]
        }
        schedule()
        let snapshot = task.snapshot
        if !snapshot.state.isActive { sessionMayBeIdle(task, snapshot.sessionID) }
    }

    // MARK: Reporting

    typealias Events = (SessionDelegate, DownloadTask, TaskSnapshot) -> Void

    /// Moves a task to `next` and queues its events (`StateChanged`, and in `then` the other
    /// events of the same step) as one step under the task's event order. Returns nil when the
    /// transition is not allowed.
    /// A task leaving running or retrying for a state without a transfer frees its place in the
    /// scheduler in the same step, so a run that is ending never holds a place a new run took.
    /// `provided` is asked of the scheduler in the same step, before the transition.
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, from allowed: Set<DownloadState>? = nil,
        provided: (Scheduler) -> Bool = { _ in true },
        _ change: (inout DownloadTask.State) -> Void = { _ in }, then: Events = { _, _, _ in }
    ) -> TaskSnapshot? {
        task.eventOrder.withLock {
            let (network, allowedNow) = state.withLockedValue { ($0.scheduler.network, provided($0.scheduler)) }
            guard allowedNow, let (previous, snapshot) = task.transition(to: next, from: allowed, { state in
                change(&state)
                state.wait(on: network)
            }) else { return nil }
            if previous.holdsTransfer && !next.holdsTransfer {
                state.withLockedValue { $0.scheduler.remove(task.id) }
            }
            if previous.isActive != next.isActive {
                state.withLockedValue { $0.activeChanged(snapshot.sessionID, by: next.isActive ? 1 : -1) }
            }
            delegate.stateChanged(task, snapshot)
            then(delegate, task, snapshot)
            return snapshot
        }
    }

    /// Changes a task without a transition and queues the events that describe the change.
    @discardableResult
    func report(_ task: DownloadTask, _ change: (inout DownloadTask.State) -> Void, events: Events) -> TaskSnapshot {
        task.eventOrder.withLock {
            let snapshot = task.update(change)
            events(delegate, task, snapshot)
            return snapshot
        }
    }

    /// After a task left the active states: observers hear if its session has nothing left to do.
    func sessionMayBeIdle(_ task: DownloadTask, _ session: SessionID) {
        delegate.sessionMayBeIdle(task, session) { [weak self] in
            self.map { !$0.hasActiveTasks(in: session) } ?? false
        }
    }
}

extension SessionManager.State {
    /// Counts `record` in (`by` 1) or out (-1) of its owner's tasks and sessions.
    mutating func counted(_ record: DownloadTaskRecord, active: Bool, by change: Int) {
        var owner = owners[record.owner] ?? SessionManager.OwnerTasks()
        owner.count += change
        owner.sessions[record.session, default: 0] += change
        if owner.sessions[record.session] == 0 { owner.sessions[record.session] = nil }
        owners[record.owner] = owner.count > 0 ? owner : nil
        if active { activeChanged(record.sessionID, by: change) }
    }

    mutating func activeChanged(_ session: SessionID, by change: Int) {
        let count = activePerSession[session, default: 0] + change
        activePerSession[session] = count > 0 ? count : nil
    }
}
