import DBus
import Dispatch
import DownloadEngine
import DownloadStore
import Foundation
import Logging
import NIOConcurrencyHelpers

/// `org.example.Downloads` on a bus: the only place where D-Bus and the engine meet. Checks who
/// calls, keeps ownership, turns engine events into signals and store records, and calls the
/// completion handlers.
public final class DownloadsService: Sendable {
    public struct Configuration: Sendable {
        /// On the system bus signals are sent only to the owner's connections.
        public var systemBus = false
        public var maxTasksPerUser = 1000
        /// How long finished, failed and cancelled tasks stay listed.
        public var retention: Duration = .seconds(7 * 86_400)
        public var progressInterval: Duration = .milliseconds(100)
        public var completionTimeout: Duration = .seconds(25)
        public init() {}
    }

    struct State {
        /// Task id → owner uid.
        var owners: [UInt64: UInt32] = [:]
        /// Connections that called us, with their uid (for unicast signals on the system bus).
        var clients: [String: UInt32] = [:]
        /// Completion calls in flight.
        var delivering: Set<SessionKey> = []
    }

    let connection: Connection
    let engine: SessionManager
    let store: DownloadStore
    let configuration: Configuration
    let logger: Logger
    let fileAccess: any FileAccess
    let state = NIOLockedValueBox(State())
    let progress: ProgressThrottle
    private let timers = TimerList()

    public init(
        connection: Connection, engine: SessionManager, store: DownloadStore, configuration: Configuration = Configuration(),
        fileAccess: any FileAccess = DirectFileAccess(), logger: Logger = Logger(label: "downloadsd")
    ) {
        self.connection = connection
        self.engine = engine
        self.store = store
        self.configuration = configuration
        self.fileAccess = fileAccess
        self.logger = logger
        self.progress = ProgressThrottle(interval: configuration.progressInterval)
    }

    /// Exports every object, restores every task, then takes the bus name.
    public func start() async throws {
        engine.delegate.add(EngineObserver(service: self))
        // ObjectManager would list (and announce) every user's tasks: session bus only.
        try connection.export(ExportedObject(
            path: DownloadsInterfaces.managerPath, interfaces: [try managerInterface()], isObjectManager: !configuration.systemBus
        ))
        let restored = try store.loadTasks()
        for (owner, record) in restored {
            do {
                try adopt(record, owner: owner)
            } catch {
                logger.error("task \(record.id) could not be restored: \(error)")
            }
        }
        if !restored.isEmpty { logger.info("restored \(restored.count) task(s) from the store") }
        try await connection.onNameOwnerChanged { [weak self] name, _, new in
            guard new.isEmpty else { return }
            _ = self?.state.withLockedValue { $0.clients.removeValue(forKey: name) }
        }
        try await connection.requestName(DownloadsInterfaces.busName)
        startTimers()
        // Pending completion calls with a well-known name can be delivered by activation now.
        for (owner, session) in try store.pendingCompletions() {
            if let handler = try store.handler(owner: owner, session: session), handler.busName != nil {
                Task { await self.deliverCompletion(SessionKey(owner: owner, name: session)) }
            }
        }
    }

    /// Checkpoints every running transfer and leaves it to carry on at the next start.
    public func shutdown() async {
        timers.cancelAll()
        await engine.shutdown()
    }

    private func startTimers() {
        let flush = DispatchSource.makeTimerSource(queue: .global())
        let interval = configuration.progressInterval
        flush.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000)))
        flush.setEventHandler { [weak self] in self?.flushDueProgress() }
        flush.resume()
        let retention = DispatchSource.makeTimerSource(queue: .global())
        retention.schedule(deadline: .now(), repeating: .seconds(3600))
        retention.setEventHandler { [weak self] in
            guard let self else { return }
            Task { await self.expireEndedTasks() }
        }
        retention.resume()
        timers.set([flush, retention])
    }

    // MARK: Paths, owners, callers

    static func path(of id: UInt64) -> ObjectPath {
        (try? DownloadsInterfaces.tasksPath.appending("\(id)")) ?? DownloadsInterfaces.tasksPath
    }

    static func id(of path: ObjectPath) -> UInt64? {
        guard DownloadsInterfaces.tasksPath.isAncestor(of: path), path.elements.count == 5 else { return nil }
        return UInt64(path.elements[4])
    }

    func owner(of id: UInt64) -> UInt32? { state.withLockedValue { $0.owners[id] } }

    /// The caller's uid (asked of the bus); remembers the connection for unicast signals.
    func caller(_ call: MethodCall) async throws -> UInt32 {
        let credentials: Credentials
        do {
            credentials = try await call.credentials()
        } catch {
            throw ServiceError.accessDenied("cannot tell who is calling: \(error)")
        }
        state.withLockedValue { $0.clients[call.sender] = credentials.uid }
        return credentials.uid
    }

    /// The task a path names, if the caller may use it.
    func task(_ path: ObjectPath, for uid: UInt32) throws -> UInt64 {
        guard let id = DownloadsService.id(of: path), let owner = owner(of: id), engine.snapshot(id) != nil else {
            throw ServiceError.notFound("no task at \(path)")
        }
        guard owner == uid || uid == 0 else {
            throw ServiceError.accessDenied("task \(id) belongs to another user")
        }
        return id
    }

    // MARK: Signals

    /// Sends a signal about something of `owner`: broadcast on the session bus, only to that
    /// user's connections on the system bus.
    private func sendSignal(path: ObjectPath, interface: String, name: String, _ arguments: [DBusValue], owner: UInt32) {
        do {
            guard configuration.systemBus else {
                try connection.emitSignal(path: path, interface: interface, name: name, arguments: arguments)
                return
            }
            let targets = state.withLockedValue { state in state.clients.filter { $0.value == owner }.map(\.key) }
            for target in targets {
                try connection.emitSignal(path: path, interface: interface, name: name, arguments: arguments, destination: target)
            }
        } catch {
            logger.error("could not emit \(name): \(error)")
        }
    }

    /// A signal of the manager object (`Progress`, `StateChanged`, `Finished`, …).
    func emit(_ name: String, owner: UInt32, _ arguments: [DBusValue]) {
        sendSignal(path: DownloadsInterfaces.managerPath, interface: DownloadsInterfaces.manager.name, name: name, arguments, owner: owner)
    }

    func emitTaskProperties(_ id: UInt64, _ changed: [String: DBusValue]) {
        guard let owner = owner(of: id) else { return }
        sendSignal(
            path: DownloadsService.path(of: id), interface: InterfaceDescription.properties.name, name: "PropertiesChanged",
            [.string(DownloadsInterfaces.task.name), .vardict(changed), .strings([])], owner: owner
        )
    }

    func emitProgress(_ id: UInt64, _ values: ProgressThrottle.Values) {
        guard let owner = owner(of: id) else { return }
        emit("Progress", owner: owner, [
            .objectPath(DownloadsService.path(of: id)), .int64(values.delta), .int64(values.total), .int64(values.expected),
        ])
        emitTaskProperties(id, ["BytesWritten": .int64(values.total), "BytesExpected": .int64(values.expected)])
    }

    private func flushDueProgress() {
        for (id, values) in progress.due() { emitProgress(id, values) }
    }

    /// Sends the held-back Progress of a task before a visible state change.
    func flushProgress(_ id: UInt64) {
        if let values = progress.flush(task: id) { emitProgress(id, values) }
    }

    // MARK: Removal and retention

    /// Forgets an ended task everywhere, with its partial file (a failed task keeps one for Resume).
    func removeTask(_ id: UInt64) throws {
        let partial = engine.snapshot(id)?.record.partialPath
        try engine.remove(id)
        if let partial { try? fileAccess.remove(partial) }
        try store.deleteTask(id)
        connection.unexport(DownloadsService.path(of: id))
        progress.forget(task: id)
        _ = state.withLockedValue { $0.owners.removeValue(forKey: id) }
    }

    func expireEndedTasks() async {
        do {
            let cutoff = Date().addingTimeInterval(-Double(configuration.retention.components.seconds))
            for id in try store.endedTasks(before: cutoff) {
                try? removeTask(id)
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
