import DBus
import DownloadEngine
import DownloadModel
import Logging
import NIOConcurrencyHelpers

/// A logind `delay` inhibitor for `sleep:shutdown`, held exactly while transfers run: before the
/// machine sleeps or shuts down (`PrepareForSleep(true)`, `PrepareForShutdown(true)`) every
/// transfer is checkpointed and only then the lock released, so what was received survives a
/// battery that runs out during the sleep; on wake (`PrepareForSleep(false)`) it is taken again
/// and the transfers carry on. Its text says how many transfers run (retaken when that changes).
/// One reconciliation at a time, coalesced (logind followed by a `SystemServiceFollower`, as the
/// network and power watchers follow theirs); without logind, nothing is held.
public final class SleepInhibitor: DownloadObserver, Sendable {
    static let busName = "org.freedesktop.login1"
    static let path: ObjectPath = "/org/freedesktop/login1"
    static let interface = "org.freedesktop.login1.Manager"

    struct State {
        var lock: UnixFD?
        /// The number of transfers the held lock's text names.
        var described = 0
        /// Between PrepareForSleep(true) and (false): no lock is taken.
        var sleeping = false
        var checkpointWanted = false
        var logindMissingLogged = false
    }

    private let connection: Connection
    private let engine: SessionManager
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    /// logind, followed: each reading is a reconciliation.
    private let logind: SystemServiceFollower<Void>

    public init(connection: Connection, engine: SessionManager, logger: Logger) {
        self.connection = connection
        self.engine = engine
        self.logger = logger
        logind = SystemServiceFollower(connection: connection, services: [(Self.busName, Self.path)], logger: logger)
    }

    public func start() async throws {
        for member in ["PrepareForSleep", "PrepareForShutdown"] {
            try await connection.subscribe(
                MatchRule(
                    sender: Self.busName, interface: Self.interface, member: member, path: Self.path
                )
            ) { [weak self] message in
                guard let self, let sender = message.sender,
                    case .boolean(let starting)? = (try? message.arguments())?.first
                else { return }
                Task {
                    await self.prepare(
                        member == "PrepareForSleep" ? "sleep" : "shutdown", starting: starting, sender: sender)
                }
            }
        }
        try await logind.start(
            read: {}, apply: { [weak self] _ in await self?.reconcile() },
            ownerChanged: { [weak self] _, new in
                // A new logind knows nothing of our lock (and a gone one released it).
                self?.state.withLockedValue { state in
                    state.lock = nil
                    state.described = 0
                    if new.isEmpty { state.sleeping = false }
                }
            }, waitsForFirst: false)
    }

    public func stop() {
        logind.stop()
        state.withLockedValue { $0.lock = nil }
    }

    // MARK: Engine events

    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {
        logind.poke()
    }

    // MARK: Work

    /// Only logind's own signals count: anyone may send a signal with its interface.
    private func prepare(_ what: String, starting: Bool, sender: String) async {
        guard let owner = try? await connection.nameOwner(Self.busName), owner == sender else {
            logger.warning(
                "ignored a Prepare\(what == "sleep" ? "ForSleep" : "ForShutdown") that did not come from logind (\(sender))"
            )
            return
        }
        state.withLockedValue { state in
            if starting {
                state.sleeping = true
                state.checkpointWanted = true
            } else {
                // Woke up, or the shutdown was cancelled.
                state.sleeping = false
            }
        }
        if !starting {
            logger.info(what == "sleep" ? "the machine woke up; transfers carry on" : "the shutdown was cancelled")
            // Connections the sleep broke are retried now, not after their back-off.
            engine.reconnectNow()
        }
        logind.poke()
    }

    private func reconcile() async {
        let (sleeping, checkpoint, held, described) = state.withLockedValue { state in
            defer { state.checkpointWanted = false }
            return (state.sleeping, state.checkpointWanted, state.lock, state.described)
        }
        if checkpoint {
            let running = engine.transfersRunning
            await engine.checkpointTransfers()
            release()
            logger.info("before sleep or shutdown: \(running) transfer(s) checkpointed; the inhibitor is released")
            return
        }
        let running = engine.transfersRunning
        if sleeping || running == 0 {
            if held != nil {
                release()
                logger.debug("no transfer runs: the sleep inhibitor is released")
            }
            return
        }
        guard held == nil || described != running else { return }
        let why = running == 1 ? "1 download in progress" : "\(running) downloads in progress"
        do {
            let reply = try await connection.call(
                destination: Self.busName, path: Self.path, interface: Self.interface, method: "Inhibit",
                arguments: [.string("sleep:shutdown"), .string("Downloads"), .string(why), .string("delay")],
                timeout: .seconds(10), autoStart: false
            )
            guard let fd = reply.first?.unixFDValue else {
                logger.warning("logind's Inhibit returned no descriptor")
                return
            }
            state.withLockedValue { state in
                // Asleep since the call went out: the new lock is dropped (closed) here.
                guard !state.sleeping else { return }
                // The lock it replaces is closed as its last reference goes.
                state.lock = fd
                state.described = running
            }
            if held == nil { logger.debug("sleep inhibitor taken: \(why)") }
            state.withLockedValue { $0.logindMissingLogged = false }
        } catch {
            let first = state.withLockedValue { state -> Bool in
                defer { state.logindMissingLogged = true }
                return !state.logindMissingLogged
            }
            if first { logger.info("no sleep inhibitor (\(error.localizedDescription)): downloads do not delay sleep") }
        }
        // Transfers may have changed while the call was out.
        if engine.transfersRunning != running { logind.poke() }
    }

    private func release() {
        state.withLockedValue { state in
            state.lock = nil
            state.described = 0
        }
    }
}
