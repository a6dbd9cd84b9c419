import AsyncHTTPClient
import Crypto
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Owns the HTTP client, the task table (id → task) and the scheduler, and reports every event
/// through its `SessionDelegate`. Knows nothing of D-Bus.
public final class SessionManager: Sendable {
    public struct Configuration: Sendable {
        public var maxRunning = 4
        public var maxRunningPerSession = 2
        public var retry = RetryPolicy()
        public var connectTimeout: Double = 30
        public var stallTimeout: Double = 60
        public var checkpointBytes: Int64 = 4 * 1024 * 1024
        public var checkpointInterval: Double = 1
        public var maxRedirects = 10
        public init() {}
    }

    struct State {
        var tasks: [UInt64: DownloadTask] = [:]
        var scheduler: Scheduler
        var shuttingDown = false
    }

    let configuration: Configuration
    let client: HTTPClient
    public let delegate: SessionDelegate
    let fileAccess: any FileAccess
    private let keyBytes: [UInt8]
    var key: SymmetricKey { SymmetricKey(data: keyBytes) }
    let logger: Logger
    let state: NIOLockedValueBox<State>

    public init(
        configuration: Configuration = Configuration(), resumeDataKey: SymmetricKey,
        fileAccess: any FileAccess = DirectFileAccess(), delegate: SessionDelegate = SessionDelegate(),
        logger: Logger = Logger(label: "downloads.engine")
    ) {
        self.configuration = configuration
        self.keyBytes = resumeDataKey.withUnsafeBytes { Array($0) }
        self.fileAccess = fileAccess
        self.delegate = delegate
        self.logger = logger
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.redirectConfiguration = .disallow
        clientConfiguration.timeout = .init(connect: .milliseconds(Int64(configuration.connectTimeout * 1000)))
        clientConfiguration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        state = NIOLockedValueBox(State(
            scheduler: Scheduler(maxRunning: configuration.maxRunning, maxRunningPerSession: configuration.maxRunningPerSession)
        ))
    }

    // MARK: Tasks

    /// Adds a task (new, or restored from the store) and starts it when the scheduler allows.
    /// Active tasks (queued, running, retrying) are queued; others are kept as they are.
    public func add(_ record: DownloadTaskRecord) throws {
        var record = record
        try record.options.validate()
        if record.state == .running || record.state == .retrying { record.state = .queued }
        let task = DownloadTask(record: record)
        try state.withLockedValue { state in
            guard state.tasks[record.id] == nil else { throw DownloadError.invalidArgument("task \(record.id) exists") }
            state.tasks[record.id] = task
            if record.state == .queued {
                state.scheduler.enqueue(record.id, session: record.session, priority: record.options.priority)
            }
        }
        schedule()
    }

    public func snapshot(_ id: UInt64) -> TaskSnapshot? {
        state.withLockedValue { $0.tasks[id] }?.snapshot
    }

    public func snapshots() -> [TaskSnapshot] {
        state.withLockedValue { Array($0.tasks.values) }.map(\.snapshot).sorted { $0.id < $1.id }
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
        let moved = move(task, to: .queued, { state in
            state.record.errorName = nil
            state.record.errorMessage = nil
            state.stopReason = nil
        }, then: { [self] snapshot in
            state.withLockedValue { $0.scheduler.enqueue(id, session: snapshot.session, priority: snapshot.record.options.priority) }
        })
        guard moved != nil else {
            throw DownloadError.wrongState("task \(id) is \(task.snapshot.state); only paused or failed tasks can be resumed")
        }
        schedule()
    }

    /// Stops a task and removes its partial file.
    public func cancel(_ id: UInt64) async throws {
        let task = try task(id)
        try await stop(task, reason: .cancel)
    }

    /// Forgets a task that has ended (finished, failed or cancelled).
    public func remove(_ id: UInt64) throws {
        let task = try task(id)
        let snapshot = task.snapshot
        guard snapshot.state.isTerminal || snapshot.state == .paused else {
            throw DownloadError.wrongState("task \(id) is \(snapshot.state); cancel it first")
        }
        _ = state.withLockedValue { $0.tasks.removeValue(forKey: id) }
    }

    /// Resume data for a paused or failed task that holds a resumable partial download.
    public func resumeData(for id: UInt64) throws -> [UInt8] {
        let record = try task(id).record
        guard record.state == .paused || record.state == .failed || record.state == .queued else {
            throw DownloadError.wrongState("task \(id) is \(record.state)")
        }
        return try ResumeData(record: record).encoded(key: key)
    }

    public func decodeResumeData(_ blob: [UInt8]) throws -> ResumeData {
        try ResumeData.decode(blob, key: key)
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
        try? await client.shutdown()
    }

    /// Whether `session` still has a queued, running or retrying task.
    public func hasActiveTasks(in session: String) -> Bool {
        state.withLockedValue { Array($0.tasks.values) }.contains { task in
            let snapshot = task.snapshot
            return snapshot.session == session && snapshot.state.isActive
        }
    }

    // MARK: Stopping

    private func stop(_ task: DownloadTask, reason: DownloadTask.StopReason) async throws {
        enum Plan { case direct(DownloadState), wait(Task<Void, Never>?) }
        let plan: Plan = try task.state.withLockedValue { state in
            let current = state.record.state
            switch (current, reason) {
            case (.queued, .pause), (.queued, .cancel), (.paused, .cancel), (.failed, .cancel):
                return .direct(reason == .pause ? .paused : .cancelled)
            case (.queued, .shutdown):
                return .wait(nil)
            case (.running, _), (.retrying, _):
                state.stopReason = reason
                state.request?.cancel()
                state.runner?.cancel()
                return .wait(state.runner)
            default:
                throw DownloadError.wrongState("task \(task.id) is \(current)")
            }
        }
        switch plan {
        case .direct(let next):
            state.withLockedValue { $0.scheduler.remove(task.id) }
            let moved = move(task, to: next, then: { [self] snapshot in
                if next == .cancelled {
                    try? fileAccess.remove(snapshot.record.partialPath)
                    delegate.completed(snapshot, error: .cancelled, resumeData: nil)
                }
            })
            guard let snapshot = moved else { throw DownloadError.wrongState("task \(task.id) changed state") }
            sessionMayBeIdle(snapshot.session)
        case .wait(let runner):
            await runner?.value
        }
    }

    // MARK: Scheduling

    func schedule() {
        let starting = state.withLockedValue { state -> [DownloadTask] in
            guard !state.shuttingDown else { return [] }
            return state.scheduler.next().compactMap { state.tasks[$0] }
        }
        for task in starting {
            // The runner is stored under the task's lock, so a stop never misses it; its own
            // events wait for this one (move holds the task's event order).
            let moved = move(task, to: .running, { state in
                state.stopReason = nil
                state.runner = Task { await self.run(task) }
            })
            if moved == nil {
                state.withLockedValue { $0.scheduler.remove(task.id) }
            }
        }
    }

    /// Moves a task to `next` and reports it (and, in `then`, the other events of the same step)
    /// as one step under the task's event order. Returns nil when the transition is not allowed.
    @discardableResult
    func move(
        _ task: DownloadTask, to next: DownloadState, _ change: (inout DownloadTask.State) -> Void = { _ in },
        then: (TaskSnapshot) -> Void = { _ in }
    ) -> TaskSnapshot? {
        task.eventOrder.withLock {
            guard let snapshot = task.transition(to: next, change) else { return nil }
            delegate.stateChanged(snapshot)
            then(snapshot)
            return snapshot
        }
    }

    /// After a task left the active states: tell observers if its session has nothing left to do.
    func sessionMayBeIdle(_ session: String) {
        if !hasActiveTasks(in: session) {
            delegate.sessionFinishedEvents(session)
        }
    }
}
