import CallerApps
import DBus
import Dispatch
import DownloadEngine
import DownloadModel
import DownloadStore
import DownloadsAPI
import Foundation
import LANShare
import Logging
import NIOConcurrencyHelpers

/// `org.example.Downloads` on a bus: the only place where D-Bus and the engine meet. Checks who
/// calls, turns engine events into signals, and calls the completion handlers. It owns no task
/// table and no file: the engine does (each task's record carries its owner), and the store is
/// written only by the `StoreObserver` it registers first.
public final class DownloadsService: Sendable {
    public struct Configuration: Sendable {
        /// On the system bus signals are sent only to the owner's connections and no
        /// ObjectManager announces tasks.
        public var systemBus = false
        /// Whether files are created with each owner's credentials (a root daemon with file
        /// helpers); otherwise only the daemon's own user and root may start tasks.
        public var filesAsEveryUser = false
        public var maxTasksPerUser = 1000
        /// One sandboxed app's share of its user's tasks (one app cannot use up its user's quota).
        public var maxTasksPerApp = 500
        public var maxHandlersPerUser = 1000
        /// One sandboxed app's share of its user's completion handlers.
        public var maxHandlersPerApp = 500
        /// Bytes the service's copies of one user's files to upload (`snapshot`) may take in
        /// the state directory on the system bus (per-user daemons copy into the user's own).
        public var maxSnapshotBytesPerUser: Int64 = 2 << 30
        /// One sandboxed app's share of it.
        public var maxSnapshotBytesPerApp: Int64 = 1 << 30
        /// Distinct sessions one user's tasks may be in.
        public var maxSessionsPerUser = 100
        /// How long finished, failed and cancelled tasks stay listed.
        public var retention: Duration = .seconds(7 * 86_400)
        public var completionTimeout: Duration = .seconds(25)
        /// A group's `GroupProgress` goes out at most this often (seconds), and at each file's end.
        public var groupProgressInterval: Double = 0.1
        /// Called once a StartGroup's tasks were taken, before it is answered: the daemon gives
        /// the heap's free memory back to the system there (`CMallocTuning`), since a group's
        /// decoded message is freed among the records it keeps. Nothing by default (tests).
        public var afterGroupTaken: (@Sendable () -> Void)?
        /// The files offered to the local network (`share`, `ListShared`, `Unshare`); nil: the
        /// daemon shares nothing (`--lan-peers off|fetch`) and a task's `share` is refused.
        public var sharing: ShareIndex?
        public init() {}
    }

    struct State {
        /// Connections that called us, with their uid and app (for unicast signals), found once
        /// per unique name and forgotten when it leaves the bus.
        var clients: [String: Caller] = [:]
        /// Completion calls in flight.
        var delivering: Set<SessionID> = []
        /// When each group's progress last went out (uptime nanoseconds).
        var groupProgressAt: [UInt64: UInt64] = [:]
        /// Groups whose end (`GroupFinished`, `GroupFailed`) went out, until they are resumed.
        var groupEnds: Set<UInt64> = []
    }

    let connection: Connection
    let engine: SessionManager
    let store: DownloadStore
    /// The store's writer of engine events; says which task's write failed.
    let storeObserver: StoreObserver
    let configuration: Configuration
    let logger: Logger
    let state = NIOLockedValueBox(State())
    let snapshotBudget: SnapshotBudget
    /// The service's own calls to clients in flight, capped per user and app.
    let clientCalls = ClientCallSlots()
    /// Reads of callers' files, off the shared pool with a deadline.
    let callerReads = CallerFileReads()
    private let timers = TimerList()

    public init(
        connection: Connection, engine: SessionManager, store: DownloadStore,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "downloadsd")
    ) {
        self.connection = connection
        self.engine = engine
        self.store = store
        // A running task whose checkpoint cannot be recorded is paused (with its resume data)
        // instead of racing on: a crash would cost everything since the last record.
        self.storeObserver = StoreObserver(
            store: store, logger: logger, sessionIsIdle: { [engine] session in !engine.hasActiveTasks(in: session) }
        ) { [engine, logger] task, failure in
            logger.warning("task \(task.id) paused: its checkpoint could not be recorded: \(failure)")
            Task { _ = try? await engine.pause(task.id) }
        }
        self.configuration = configuration
        snapshotBudget = SnapshotBudget(
            perUser: configuration.maxSnapshotBytesPerUser, perApp: configuration.maxSnapshotBytesPerApp)
        self.logger = logger
    }

    /// Exports every object, restores every task, then takes the bus name.
    public func start() async throws {
        engine.delegate.add(storeObserver)
        engine.delegate.add(EngineObserver(service: self))
        engine.setChallengeAgent(self)
        // ObjectManager would list (and announce) every user's tasks: session bus only.
        try connection.export(
            ExportedObject(
                path: DownloadsAPI.managerPath, interfaces: [try managerInterface()],
                isObjectManager: !configuration.systemBus
            ))
        try connection.export(try taskSubtree())
        try connection.export(try groupSubtree())
        let loaded = try store.loadTasks()
        for rejected in loaded.rejected {
            logger.error("task \(rejected.id) is kept aside in the database and not served: \(rejected.reason)")
        }
        // Groups first: each restored task joins its group's list as it is added.
        engine.restore(groups: try store.loadGroups())
        engine.restore(loaded.tasks, nextID: loaded.nextID)
        if !loaded.tasks.isEmpty { logger.info("restored \(loaded.tasks.count) task(s) from the store") }
        try await connection.onNameOwnerChanged { [weak self] name, _, new in
            guard new.isEmpty else { return }
            _ = self?.state.withLockedValue { $0.clients.removeValue(forKey: name) }
        }
        try await connection.requestName(DownloadsAPI.busName)
        startTimers()
        // A session's last end and the completion call it makes due are one transaction; its
        // announcement (`EventsFinished`) follows it, and a kill between them is finished here,
        // before any task runs again. Ends still counted (their saves raced with another task's
        // and left the call to the idle step) are made due here too.
        var due = try store.sessionsWithUnreportedEnds()
        for session in try store.unannouncedCompletions() where !due.contains(session) { due.append(session) }
        for session in due where !engine.hasActiveTasks(in: session) {
            logger.info(
                "session \(LogText.escaped(session.shownDescription)): tasks ended before the last stop; its completion is due"
            )
            sessionBecameIdle(session)
        }
        // Pending completion calls with a well-known name can be delivered by activation now.
        for session in try store.pendingCompletions() {
            if let handler = try store.handler(session), handler.busName != nil {
                Task { await self.deliverCompletion(session) }
            }
        }
    }

    /// Checkpoints every running transfer and leaves it to carry on at the next start.
    public func shutdown() async {
        timers.cancelAll()
        await engine.shutdown()
    }

    private func startTimers() {
        let retention = DispatchSource.makeTimerSource(queue: .global())
        retention.schedule(deadline: .now(), repeating: .seconds(3600))
        retention.setEventHandler { [weak self] in
            guard let self else { return }
            Task { await self.expireEndedTasks() }
        }
        retention.resume()
        timers.set([retention])
    }

    // MARK: Callers

    /// Who calls: the uid (asked of the bus) and the app (asked of the kernel about the process
    /// the bus names, `AppIdentity`), once per connection; remembered for unicast signals. Any
    /// doubt about the app refuses the call: a sandboxed app is never taken for the host.
    func caller(_ call: MethodCall) async throws -> Caller {
        if let known = state.withLockedValue({ $0.clients[call.sender] }) { return known }
        let credentials: Credentials
        do {
            credentials = try await call.credentials()
        } catch {
            throw DownloadsErrorName.accessDenied.error("cannot tell who is calling: \(error)")
        }
        return try await caller(call.sender, credentials: credentials)
    }

    /// The uid and app of the connection `sender`, whose credentials the bus gave.
    func caller(_ sender: String, credentials: Credentials) async throws -> Caller {
        if let known = state.withLockedValue({ $0.clients[sender] }) { return known }
        let app: String
        do {
            // `/.flatpak-info` is opened with the caller's own rights (as xdg-desktop-portal,
            // running as the user, opens it): a root daemon needs no CAP_SYS_PTRACE for it. A
            // root caller holds capabilities the daemon does not, so the kernel hides its root
            // from the daemon: root, trusted with everything, is the host then.
            app = try await BlockingWork.run { [engine] in
                try AppIdentity.app(
                    pid: credentials.pid ?? 0, uid: credentials.uid, securityLabel: credentials.securityLabel,
                    openInfo: { pid in
                        guard credentials.uid == 0 else {
                            return try engine.openAppInfo(pid: pid, owner: credentials.uid)
                        }
                        do {
                            return try AppIdentity.openHere(pid)
                        } catch let failure as AppIdentity.Failure where failure.isDenied {
                            return nil
                        }
                    }
                )
            }
        } catch {
            logger.warning(
                "call from \(sender) (uid \(credentials.uid)) refused: cannot tell which app it is: \(error)")
            throw DownloadsErrorName.accessDenied.error("cannot tell which app is calling: \(error)")
        }
        let caller = Caller(uid: credentials.uid, app: app)
        state.withLockedValue { $0.clients[sender] = caller }
        if caller.isSandboxed { logger.info("\(sender) is app \(LogText.escaped(app)) of uid \(caller.uid)") }
        return caller
    }

    /// The task a path names, if the caller may use it. Another user's task, or another app's,
    /// answers exactly as a missing one.
    func task(_ path: ObjectPath, for caller: Caller) throws -> TaskSnapshot {
        guard let id = DownloadsAPI.taskID(path), let snapshot = engine.snapshot(id), caller.sees(snapshot) else {
            throw DownloadsErrorName.notFound.error("no task at \(path)")
        }
        return snapshot
    }

    // MARK: Signals

    /// Sends a signal about something of `owner` and `app`: broadcast on the session bus for the
    /// daemon's own user's host tasks; otherwise only to the connections that may see it (the
    /// owner's host connections, and the app's own). Checked against its declaration.
    /// `appOnly`: only the app's own connections (a signal that names no task, only a session
    /// name the user's host clients may use too: `EventsFinished`).
    private func send(
        _ interface: InterfaceDescription, _ name: String, path: ObjectPath, _ arguments: [DBusValue], owner: UInt32,
        app: String,
        appOnly: Bool = false
    ) {
        do {
            if broadcasts(owner, app: app) {
                try connection.emit(interface, name, path: path, arguments: arguments)
                return
            }
            let targets = state.withLockedValue { state in
                state.clients.filter { $0.value.hears(owner: owner, app: app) && (!appOnly || $0.value.app == app) }
                    .map(\.key)
            }
            for target in targets {
                try connection.emit(interface, name, path: path, arguments: arguments, destination: target)
            }
        } catch {
            logger.error("could not emit \(name): \(error)")
        }
    }

    /// Whether events of `owner`'s tasks may go to everyone on the bus: only on the session bus,
    /// only for the daemon's own user and only for host callers' tasks; whenever the owner is
    /// someone else (a root daemon on any bus), the multi-user rules hold and signals go to the
    /// owner's connections alone; a sandboxed app's go to it and its user's host connections
    /// (xdg-dbus-proxy passes every broadcast of a name an app may talk to).
    func broadcasts(_ owner: UInt32, app: String) -> Bool {
        !configuration.systemBus && owner == Self.daemonUID && app.isEmpty
    }

    static let daemonUID = UInt32(getuid())

    func emit(_ signal: ManagerSignal, owner: UInt32, app: String, appOnly: Bool = false) {
        send(
            DownloadsInterfaces.manager, signal.name, path: DownloadsAPI.managerPath, signal.arguments, owner: owner,
            app: app,
            appOnly: appOnly
        )
    }

    func emitTaskProperties(_ snapshot: TaskSnapshot, _ properties: [TaskProperty]) {
        var changed: [String: DBusValue] = [:]
        for property in properties { changed[property.name] = DownloadsService.value(property, of: snapshot) }
        emitPropertiesChanged(task: snapshot, changed)
    }

    /// `PropertiesChanged` of `org.example.Downloads.Task` on one task's object.
    private func emitPropertiesChanged(task: TaskSnapshot, _ changed: [String: DBusValue]) {
        send(
            InterfaceDescription.properties, "PropertiesChanged", path: DownloadsAPI.taskPath(task.id),
            [.string(DownloadsInterfaces.task.name), .vardict(changed), .strings([])], owner: task.owner,
            app: task.record.app
        )
    }

    /// One Progress signal and the properties it changes (in the task's event order: the engine
    /// sends progress at most every `progressInterval`, the last of it before the next event).
    func emitProgress(_ task: TaskSnapshot, delta: Int64, total: Int64, expected: Int64, properties: Bool = true) {
        emit(
            .progress(
                task: DownloadsAPI.taskPath(task.id), bytesWritten: delta, totalBytesWritten: total,
                totalBytesExpected: expected
            ), owner: task.owner, app: task.record.app)
        guard properties else { return }
        emitPropertiesChanged(
            task: task,
            [
                TaskProperty.bytesWritten.name: .int64(total), TaskProperty.bytesExpected.name: .int64(expected),
                TaskProperty.speed.name: .uint64(task.speed),
            ])
    }

    // MARK: Retention

    func expireEndedTasks() async {
        do {
            let cutoff = Date().addingTimeInterval(-Double(configuration.retention.components.seconds))
            for id in try store.endedTasks(before: cutoff) {
                try? await engine.remove(id)
            }
        } catch {
            logger.error("retention: \(error)")
        }
    }
}

/// The service's timers (Dispatch sources are thread-safe; the list is behind a lock).
private final class TimerList: @unchecked Sendable {
    private let lock = NIOLock()
    private var timers: [DispatchSourceTimer] = []

    func set(_ new: [DispatchSourceTimer]) { lock.withLock { timers = new } }

    func cancelAll() {
        lock.withLock {
            for timer in timers { timer.cancel() }
            timers = []
        }
    }
}
