import AsyncHTTPClient
import Dispatch
import DownloadModel
import UserFiles

/// One download: its record, its live counters and the handles that stop it. All mutable state
/// sits in one `State` behind one lock, and every state change goes through
/// `DownloadState.canTransition(to:)`, so concurrent pause/resume/cancel cannot corrupt it.
///
/// A task is one allocation (`TaskStorage`: its id and `State` beside the lock that guards the
/// state) reached through this one reference: a hundred thousand queued tasks took a 48-byte
/// object each beside their state's box (Benchmarks/RESULTS.md, issue 61's fourth sitting).
/// Copies of it are the same task. Sendable because the storage's state is reached only under
/// its lock (`withState` and the operations below) and its id never changes.
struct DownloadTask: @unchecked Sendable {
    enum StopReason: Sendable, Equatable {
        case pause, cancel, shutdown
        /// The network or power no longer allows the task: back to the queue until it does.
        case wait

        /// Where a run this stops leaves the task: paused, cancelled, or queued again (a
        /// shutdown's restart, the network's return).
        var stoppedState: DownloadState {
            switch self {
            case .pause: return .paused
            case .cancel: return .cancelled
            case .shutdown, .wait: return .queued
            }
        }
    }

    /// What a task holds under its lock: 16 fields (the record, `waitingFor` and `TaskRunState`'s;
    /// `TaskStateFieldsTests` counts them against this number). An app's answers to its
    /// questions are not among them: they belong to an origin and a session (`AnswerBook`).
    struct State {
        var record: DownloadTaskRecord
        /// Why it waits while queued (kept by the manager).
        var waitingFor: WaitingFor = .nothing
        /// The rest (`TaskRunState`), made the first time one of its fields is set: a queued
        /// task that never ran, was never asked anything and holds no descriptor has none.
        private var more: TaskRunState?

        init(record: DownloadTaskRecord) {
            self.record = record
        }

        private mutating func made() -> TaskRunState {
            if let more { return more }
            let made = TaskRunState(bytesWritten: record.durableOffset, ownLimit: record.options.maxBytesPerSecond)
            more = made
            return made
        }

        /// Bytes received and handed to the file writer (may be ahead of the durable offset):
        /// the durable offset until a run (or a change) says otherwise.
        var bytesWritten: Int64 {
            get { more?.bytesWritten ?? record.durableOffset }
            set { if more != nil || newValue != record.durableOffset { made().bytesWritten = newValue } }
        }
        /// `bytesWritten` at the last progress delivery (the durable offset, as `bytesWritten`).
        var progressDelivered: Int64 {
            get { more?.progressDelivered ?? record.durableOffset }
            set { if more != nil || newValue != record.durableOffset { made().progressDelivered = newValue } }
        }

        // `TaskRunState`'s fields (documented there); a nil set on a task without one makes none.

        var runner: Task<Void, Never>? {
            get { more?.runner }
            set { if more != nil || newValue != nil { made().runner = newValue } }
        }
        /// Made with the rest on first use: a run keeps its requests in it.
        var requests: RequestsOut {
            mutating get { made().requests }
            set { made().requests = newValue }
        }
        var stopReason: StopReason? {
            get { more?.stopReason }
            set { if more != nil || newValue != nil { made().stopReason = newValue } }
        }
        var runID: UInt64 {
            get { more?.runID ?? 0 }
            set { made().runID = newValue }
        }
        var progressQueued: Bool {
            get { more?.progressQueued ?? false }
            set { made().progressQueued = newValue }
        }
        var progressDeliveredAt: UInt64 {
            get { more?.progressDeliveredAt ?? 0 }
            set { made().progressDeliveredAt = newValue }
        }
        var transfer: (any RunHandle)? {
            get { more?.transfer }
            set { if more != nil || newValue != nil { made().transfer = newValue } }
        }
        /// Made with the rest on first use (its own limit from the record's options then; a
        /// change of the options sets it again).
        var limit: RateLimit {
            mutating get { made().limit }
        }
        /// The limit, only when the rest was made (nil: no run, no group share, no pace yet).
        var limitIfMade: RateLimit? { more?.limit }
        var anchor: DescriptorAnchor? {
            get { if case .directory(let anchor)? = more?.held { anchor } else { nil } }
            set {
                if let newValue { made().held = .directory(newValue) } else if anchor != nil { more?.held = nil }
            }
        }
        var source: SourceFile? {
            get { if case .file(let file)? = more?.held { file } else { nil } }
            set {
                if let newValue { made().held = .file(newValue) } else if source != nil { more?.held = nil }
            }
        }
        var speedMeter: SpeedMeter {
            get { more?.speedMeter ?? SpeedMeter() }
            set { made().speedMeter = newValue }
        }
        var asking: AskedQuestion? {
            get { more?.asking }
            set { if more != nil || newValue != nil { made().asking = newValue } }
        }
        var io: DispatchQueue? {
            get { more?.io }
            set { if more != nil || newValue != nil { made().io = newValue } }
        }

        /// The I/O queue of the task `id` (this state's), made on first use.
        mutating func io(of id: UInt64) -> DispatchQueue {
            if let queue = io { return queue }
            let queue = DispatchQueue(label: "org.example.Downloads.task.\(id).io")
            io = queue
            return queue
        }

        var snapshot: TaskSnapshot {
            TaskSnapshot(
                record: record, bytesWritten: bytesWritten, waitingFor: waitingFor,
                speed: record.state == .running ? speedMeter.speed() : 0, asking: asking?.challenge
            )
        }

        /// Sets `waitingFor` from the begin time and `conditions` (queued) or clears it (any other state).
        mutating func wait(on conditions: RunConditions, now: UInt64 = WallClock.now) {
            if record.state == .queued, asking != nil {
                waitingFor = .app
            } else if record.state == .queued {
                waitingFor = record.options.mayBegin(at: now) ? conditions.waitingFor(record.options) : .beginTime
            } else if !(record.state == .running && waitingFor == .yielding) {
                waitingFor = .nothing
            }
        }
    }

    private let storage: TaskStorage

    /// Read without the lock: it never changes.
    var id: UInt64 { storage.id }

    /// Every blocking call on this task's files runs here, in order: open, pwrite, ftruncate,
    /// fdatasync, rename, unlink, the SHA-256. Never on an event loop. Made when first needed
    /// (`State.io`): a queued task that never ran holds none.
    var io: DispatchQueue {
        withState { $0.io(of: id) }
    }

    init(record: DownloadTaskRecord) {
        storage = TaskStorage.make(id: record.id, state: State(record: record))
    }

    /// Reads or changes the task's state under its lock (`DownloadTask.state` in `SessionManager`'s
    /// order: a leaf): bookkeeping only (no I/O, no wait, no other lock); what must happen
    /// because of it happens after. The state is reached only through this and the operations
    /// below, which use it.
    func withState<T>(_ body: (inout State) throws -> T) rethrows -> T {
        try storage.withLockedState(body)
    }

    /// Runs `body` in the task's event order: a change and the events that describe it, queued
    /// together (see `EventDelivery`), so the delivery queue holds one task's changes in the order
    /// they happened even when two threads change it. Its lock (`eventOrder`, shared with other
    /// tasks: `EventOrderLocks`) is lock 1 of `SessionManager`'s order: only the task's own lock
    /// and the manager's are taken inside, never another event order.
    func inEventOrder<T>(_ body: () throws -> T) rethrows -> T {
        try EventOrderLocks.withLock(of: id, body)
    }

    var snapshot: TaskSnapshot {
        withState { $0.snapshot }
    }

    var record: DownloadTaskRecord { withState { $0.record } }

    /// Moves to `next` if allowed (and, with `from`, only out of those states); returns the
    /// state before and the snapshot after the change, or nil when refused.
    func transition(
        to next: DownloadState, from allowed: Set<DownloadState>? = nil, _ change: (inout State) -> Void = { _ in }
    ) -> (DownloadState, TaskSnapshot)? {
        withState { state in
            let previous = state.record.state
            guard previous.canTransition(to: next), allowed?.contains(previous) ?? true else { return nil }
            state.record.enter(next)
            change(&state)
            // A finished task makes no more files: its caller's descriptor is given back.
            if next == .finished {
                state.anchor = nil
                state.source = nil
            }
            return (previous, state.snapshot)
        }
    }

    @discardableResult
    func update(_ change: (inout State) -> Void) -> TaskSnapshot {
        withState { state in
            change(&state)
            return state.snapshot
        }
    }

    /// Bytes up to `position` were handed to the writer. Returns when the caller should deliver
    /// progress (`interval` nanoseconds after the last delivery, or now), or nil when a delivery
    /// is queued already: one lock per chunk, one queue hop per delivery.
    func wrote(upTo position: Int64, interval: UInt64) -> DispatchTime? {
        withState { state in
            state.bytesWritten = position
            guard !state.progressQueued else { return nil }
            state.progressQueued = true
            return DispatchTime(uptimeNanoseconds: state.progressDeliveredAt + interval)
        }
    }

    /// The newest counters and the bytes since the last delivery; nil when nothing moved.
    /// `endsQueued`: called by the queued delivery, so the next chunk may queue another.
    func takeProgress(endsQueued: Bool) -> (TaskSnapshot, Int64)? {
        withState { state in
            if endsQueued { state.progressQueued = false }
            let delta = state.bytesWritten - state.progressDelivered
            guard delta != 0 else { return nil }
            state.progressDelivered = state.bytesWritten
            state.progressDeliveredAt = DispatchTime.now().uptimeNanoseconds
            state.speedMeter.record(state.bytesWritten, at: state.progressDeliveredAt)
            // After a restart from zero the total went down: report what the new run wrote.
            return (state.snapshot, delta > 0 ? delta : state.bytesWritten)
        }
    }

    /// The bytes up to `position` (an event's snapshot) that were not delivered, if any: the
    /// progress an event delivers before itself. Only forward: a lower position is an older
    /// snapshot, or a restart, which the queued delivery reports.
    func takeProgress(upTo position: Int64) -> Int64? {
        withState { state in
            let delta = position - state.progressDelivered
            guard delta > 0 else { return nil }
            state.progressDelivered = position
            state.progressDeliveredAt = DispatchTime.now().uptimeNanoseconds
            return delta
        }
    }

    /// Runs a blocking file operation on this task's I/O queue, off the cooperative pool.
    func onIOQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await io.perform(body)
    }
}
