import AsyncHTTPClient
import Crypto
import DownloadModel
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import ProxyRules
import UserFiles

/// Owns the HTTP client, the task table (id → task) and the scheduler, and reports every event
/// through its `EventDelivery`. Knows nothing of D-Bus. Owns every partial file: creating,
/// adopting (from resume data), removing; nobody else touches them.
///
/// Its jobs, one file each: the task table (`TaskTable`, pure), control calls (`+Control`), resume
/// data (`+ResumeData`), the network and sleep (`+Network`), scheduling and runs (`+Scheduling`),
/// transitions and events (`+Reporting`), what its transfer runs may ask of it
/// (`+TransferRunOwner`: a run reaches the manager only through `TransferRunOwner`).
///
/// Every lock of the engine, in order (the one place it is written down: 24 of them, each private
/// to its type or, for the manager's and a run's, reached only from that type's own files;
/// `LockListTests` counts their declarations against this number). A thread holding one may
/// take a later one, never an earlier one. Each is held for bookkeeping only: no I/O, no
/// waiting, no observer code, no callback, no call into AsyncHTTPClient, no task cancellation (a
/// stop sets its reason under the lock and cancels requests and the runner after it; the one
/// exception, named at 3, only enqueues).
/// 1. `DownloadTask.eventOrder` (`inEventOrder`): held while a task changes and its events are
///    queued (only queued: observers run later, on `EventDelivery`'s delivery queue). One of
///    `EventOrderLocks`' 256, shared by the tasks whose ids fall on it: never two held at once.
/// 2. `SessionManager.state` (`TaskTable`): the tasks, the counts, the scheduler, the next id.
/// 3. `DownloadTask.state` (`withState`, `update`, `transition`): one task's record and counters.
///    The run's `Task` is created under 1–3 (creating it only enqueues it), so a stop never
///    misses the runner.
/// 4. `SegmentTable`'s lock: the ranges; each chunk is queued to the writer under it (takes 5).
/// 5. `PartialFileWriter`'s lock: the queue of file operations (starting a drain on `io`).
/// 6. `TransferRun.segmentState` (`SegmentState`): a segmented run's phase and places (takes 7).
/// 7. `SegmentWorkers`' state: the connections running.
/// Leaves (nothing is taken under them), 17: a run's `RequestsOut` (its requests' cancels: a
/// stop sets its reason under 3, then stops them), `PartialFileWriter.generation` (the file's version:
/// a finished sync reads it, then records with no lock held), `SessionManager.beginTimer`, a
/// segmented attempt's `Attempt`, a `SegmentWorkers.Seat`'s state, `HTTPClients`' state,
/// `FileHelperPool`'s helpers, `EventDelivery`'s observers and pending deliveries (one lock),
/// `AddressResolver`'s continuation, a `ForwardedRequest`'s state (its channel, connection, end
/// mark and deadline: one lock), `ConnectionWatch`'s open tags, `PlainServers`' answers, a
/// `ReplyFile`'s open file, an upload request's marks (short, sent whole, the mark's task: one
/// lock, `UploadRun.exchange`), a `BodyWaits`' open waits, a `FileRegionWatch`'s descriptor and
/// marks, a finish's `TwoWaits`. The manager's answer agent and its logged attribute refusals
/// are `TaskTable`'s (lock 2); a run's checkpoint count, a `ConnectionRecord`'s count of
/// requests and an `UploadDelegate`'s head mark are atomics (`Synchronization.Atomic`), no lock.
/// Queues: observers on `EventDelivery`'s one delivery queue, in batches; file calls on each task's `io` queue
/// (through `PartialFileWriter`), its checkpoint syncs on the writer's `syncQueue`; the HTTP
/// client's event loops only parse, hand buffers to the writer and take 2–6 briefly.
public final class SessionManager: Sendable {
    public struct Configuration: Sendable {
        public var maxRunning = 4
        public var maxRunningPerSession = 2
        /// Connections all running transfers may open together (segmented ones open several).
        public var maxConnections = 16
        /// Connections a download with mirrors opens to one server at most (`MirrorSet`).
        public var maxConnectionsPerHost = 4
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
        /// A transfer whose response has at most this many bytes to go stops counting against
        /// `maxRunning` and `maxRunningPerSession` (it keeps its connection place): small files
        /// start while it ends instead of queueing behind four of them.
        public var shortTransfer: Int64 = 1 << 20
        /// Progress reaches the observers at most this often per task (seconds), always in the
        /// task's event order: the last of it before whatever event follows, never after. A
        /// fast transfer writes a chunk every few tens of microseconds; a queue hop per chunk
        /// would cost more CPU than the service's whole D-Bus side. The daemon sets it from
        /// `--progress-rate` (10 a second by default).
        public var progressInterval: Double = 0.02
        /// A segmented download splits no range below this (aria2's `--min-split-size`).
        public var minimumSegment: Int64 = 1 << 20
        /// Networks that tasks of owners other than root may not reach: every hop's address is
        /// checked at connect time and the connection pinned to a checked address.
        public var deniedNetworks: [NetworkRange] = []
        /// Certificates (PEM) trusted beside the system store: an administrator's flag, never a caller's.
        public var caFile: String?
        /// Whether the service offers HTTP/2 to servers (ALPN). Off by default: over TLS HTTP/1.1
        /// fetched every shape measured as fast or faster for a quarter to two fifths less CPU, and
        /// fills a long link that HTTP/2's windows do not (Benchmarks/RESULTS.md, "HTTPS at curl's
        /// cost: the rest"); `--http2` for servers that speak nothing else.
        public var offerHTTP2 = false
        /// The proxy of tasks that give none of their own: the daemon's environment
        /// (`http_proxy`, `https_proxy`, `all_proxy`, `no_proxy`), as an administrator sets it.
        public var proxyEnvironment = ProxyEnvironment.none
        /// false: no finished file records where it came from, whatever its task asks
        /// (`downloadsd --no-origin-attributes`; `OriginAttributes`).
        public var originAttributes = true
        /// Finds the machines of the local network that have a task's file (`lan_peers`); nil:
        /// none are looked for (`downloadsd --lan-peers off`, or no Avahi).
        public var peerFinder: (any PeerFinder)?
        public init() {}

        /// The part of them Network/ takes.
        var network: NetworkSettings {
            NetworkSettings(
                connectTimeout: connectTimeout, proxyEnvironment: proxyEnvironment, deniedNetworks: deniedNetworks)
        }
    }

    let configuration: Configuration
    let clients: HTTPClients
    public let delegate: EventDelivery
    let files: any FileAccessProvider
    private let keyBytes: [UInt8]
    var key: SymmetricKey { SymmetricKey(data: keyBytes) }
    let logger: Logger
    let state: NIOLockedValueBox<TaskTable>
    /// Whether the answer book (`TaskTable.answers`) holds anything: set under the table lock
    /// whenever it changes (`changeAnswers`), read without it, so a run's start and a task's end
    /// take no lock for the book while no app answered anything (nearly always).
    let answersKept = Atomic<Bool>(false)
    /// The timer for tasks waiting for their `earliest_begin` (`+BeginTime`).
    let beginTimer = NIOLockedValueBox(BeginTimer())

    public init(
        configuration: Configuration = Configuration(), resumeDataKey: SymmetricKey,
        files: any FileAccessProvider = DirectFileAccess(), delegate: EventDelivery = EventDelivery(),
        logger: Logger = Logger(label: "downloads.engine")
    ) {
        self.configuration = configuration
        self.keyBytes = resumeDataKey.withUnsafeBytes { Array($0) }
        self.files = files
        self.delegate = delegate
        self.logger = logger
        clients = HTTPClients(
            connectTimeout: configuration.connectTimeout, caFile: configuration.caFile,
            connectionsPerHost: configuration.maxConnections, offerHTTP2: configuration.offerHTTP2
        )
        state = NIOLockedValueBox(
            TaskTable(
                scheduler: Scheduler(
                    maxRunning: configuration.maxRunning, maxRunningPerSession: configuration.maxRunningPerSession,
                    maxConnections: configuration.maxConnections
                )
            ))
    }

    public func snapshot(_ id: UInt64) -> TaskSnapshot? {
        state.withLockedValue { $0.tasks[id] }?.snapshot
    }

    public func snapshots() -> [TaskSnapshot] {
        state.withLockedValue { Array($0.tasks.values) }.map(\.snapshot).sorted { $0.id < $1.id }
    }

    /// Up to `limit` ids of the tasks after id `after` whose record `include` takes (read in
    /// place, under each task's lock: no snapshot made), in id order, and whether another follows.
    public func taskIDs(
        after: UInt64, limit: Int, where include: (DownloadTaskRecord) -> Bool
    ) -> (ids: [UInt64], more: Bool) {
        // Taken from the table in id order a batch at a time, each record read outside the
        // manager's lock (a task's lock is never taken under it).
        let batch = max(limit, 1024)
        var ids: [UInt64] = []
        var from = after
        while true {
            let candidates = state.withLockedValue { $0.tasks(after: from, limit: batch) }
            for task in candidates where task.withState({ include($0.record) }) {
                if ids.count == limit { return (ids, true) }
                ids.append(task.id)
            }
            guard candidates.count == batch, let last = candidates.last else { return (ids, false) }
            from = last.id
        }
    }

    /// How many tasks' records `include` takes (read in place, as `taskIDs` reads them).
    public func countTasks(where include: (DownloadTaskRecord) -> Bool) -> Int {
        let tasks = state.withLockedValue { Array($0.tasks.values) }
        return tasks.reduce(0) { count, task in count + (task.withState { include($0.record) } ? 1 : 0) }
    }

    public func snapshots(owner: UInt32) -> [TaskSnapshot] {
        snapshots().filter { $0.owner == owner }
    }

    /// Returns once every event of task `id` reported so far has reached the observers (the
    /// store has written it): what a caller waits for before telling a client the task exists.
    public func eventsDelivered(_ id: UInt64) async {
        guard let task = state.withLockedValue({ $0.tasks[id] }) else { return }
        await delegate.eventsDelivered(after: task)
    }

    /// `eventsDelivered` for every file of group `id`, waited for once: a call's reply then means
    /// its effect on every file is in the store.
    public func eventsDelivered(ofGroup id: UInt64) async {
        let tasks = state.withLockedValue { state in (state.groups[id]?.tasks ?? []).compactMap { state.tasks[$0] } }
        await delegate.eventsDelivered(after: tasks)
    }

    func task(_ id: UInt64) throws -> DownloadTask {
        guard let task = state.withLockedValue({ $0.tasks[id] }) else {
            throw DownloadError.notFound("no task \(id)")
        }
        return task
    }

    public var network: NetworkStatus { state.withLockedValue { $0.scheduler.network } }

    var reconnectGeneration: UInt64 { state.withLockedValue { $0.reconnectGeneration } }

    /// Transfers holding a place now (running, or retrying after a pause).
    public var transfersRunning: Int { state.withLockedValue { $0.scheduler.transferCount } }

    /// Whether `session` still has a queued, running or retrying task.
    public func hasActiveTasks(in session: SessionID) -> Bool {
        state.withLockedValue { $0.hasActiveTasks(in: session) }
    }

    /// Whether any task is queued (waiting for its begin time, a network or power too), running
    /// or retrying: the daemon has work (it does not exit when idle).
    public var anyTaskActive: Bool { state.withLockedValue { !$0.activePerSession.isEmpty } }

    public func taskCount(owner: UInt32) -> Int {
        state.withLockedValue { $0.owners[owner]?.count ?? 0 }
    }

    /// The names of the sessions `owner`'s tasks are in.
    public func sessionNames(owner: UInt32) -> Set<String> {
        state.withLockedValue { Set(($0.owners[owner]?.sessions ?? [:]).keys) }
    }

}
