import ArgumentParser
import CMallocTuning
import Crypto
import DBus
import Dispatch
import DownloadEngine
import DownloadModel
import DownloadStore
import DownloadsAPI
import DownloadsService
import Foundation
import Logging
import NIOSSL
import ProxyRules

@main
struct Downloadsd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downloadsd",
        abstract: "Background downloads over D-Bus (org.example.Downloads).",
        discussion: """
            Environment: http_proxy, https_proxy (or HTTPS_PROXY), all_proxy (or ALL_PROXY) and no_proxy \
            (or NO_PROXY), read as curl reads them, are the proxy of every task that gives none of its own \
            (an administrator sets them in a systemd drop-in); a task's proxy option, which clients resolve \
            in their user's session, comes first.
            """
    )

    @Flag(help: "Serve on the session bus (the default).") var session = false
    @Flag(help: "Serve on the system bus (honours DBUS_SYSTEM_BUS_ADDRESS).") var system = false
    @Option(help: "Serve on the bus at this address.") var address: String?
    @Option(
        help:
            "Where the database and the resume-data key live (default: $XDG_STATE_HOME/org.example.Downloads, or /var/lib/org.example.Downloads with --system)."
    )
    var stateDir: String?
    @Option(help: "Transfers running at once.") var maxRunning = 4
    @Option(help: "Transfers running at once in one session.") var maxRunningPerSession = 2
    @Option(help: "Connections all running transfers open together (a segmented one opens several).")
    var maxConnections = 16
    @Option(help: "Connections a download with mirrors opens to one server (scheme, host and port) at most.")
    var maxConnectionsPerHost = 4
    @Option(help: "Tasks one user may have (QuotaExceeded beyond).") var maxTasksPerUser = 1000
    @Option(
        help: ArgumentHelp(
            "Bytes the service's copies of one user's files to upload (option snapshot) may take in the state directory on the system bus; a sandboxed app may take half (QuotaExceeded beyond).",
            valueName: "bytes"
        ))
    var maxSnapshotBytesPerUser: Int64 = 2 << 30
    @Option(help: "Tasks one sandboxed app (Flatpak, Snap) may have, inside its user's (QuotaExceeded beyond).")
    var maxTasksPerApp = 500
    @Option(help: "Distinct sessions one user's tasks may be in (QuotaExceeded beyond).") var maxSessionsPerUser = 100
    @Option(help: "Days finished, failed and cancelled tasks stay listed.") var retentionDays = 7
    @Option(help: "Progress signals per task per second, at most (each sent in order with the task's other signals).")
    var progressRate = 10
    @Option(help: "The per-user file helper a root daemon starts (default: downloads-file-helper beside downloadsd).")
    var fileHelper: String?
    @Option(help: "Seconds one file operation of a user's helper may take before the helper is killed.")
    var fileHelperTimeout: Double = 30
    @Option(
        help: ArgumentHelp(
            "A network (CIDR) that no user but root may download from; repeatable; replaces the default (with --system: 169.254.0.0/16 and fe80::/10, link-local); 'none' denies nothing.",
            valueName: "cidr"
        ))
    var denyNetwork: [String] = []
    @Option(
        help: ArgumentHelp(
            "Certificates (PEM) to trust beside the system store (/etc/ssl/certs/ca-certificates.crt), e.g. a test CA; an administrator's flag, no caller can send one. An organisation's CA belongs in the system store: update-ca-certificates.",
            valueName: "file"
        ))
    var caFile: String?
    @Flag(
        help:
            "Offer HTTP/2 to servers (ALPN) for single-stream downloads and uploads, one connection per host. Off: HTTP/1.1 with keep-alive, which over TLS fetched as fast or faster for less CPU in every measurement (docs/https-and-proxies.md); for servers that speak only HTTP/2."
    )
    var http2 = false
    @Option(
        help: ArgumentHelp(
            "What tasks may do with the local network: off; fetch (from peers that have a file, by its SHA-256); share (that, and offer finished files whose task asked, on Passim's wire).",
            valueName: "off|fetch|share"))
    var lanPeers: LANPeersMode = .share
    @Option(help: "The port the share server takes when it is free (Passim's), else one the kernel chooses.")
    var sharePort = 27500
    @Flag(
        inversion: .prefixedNo,
        help:
            "Follow logind (a sleep inhibitor while transfers run), NetworkManager (tasks wait offline and, with allow_metered false, on metered networks), UPower (with requires_ac_power, on battery) and power-profiles-daemon (background tasks under power-saver) on the system bus."
    )
    var desktop = true
    @Flag(
        inversion: .prefixedNo,
        help:
            "Write where each finished download came from on its file (user.xdg.origin.url and user.xdg.referrer.url, the freedesktop Common Extended Attributes that file managers show), unless its task's origin_attributes is false; --no-origin-attributes writes them for nobody."
    )
    var originAttributes = true
    @Option(
        help: ArgumentHelp(
            "Exit after this many seconds with nothing to do: no task queued, running or retrying, no completion call to make, no call for that long (D-Bus activation starts the daemon again at the next call); 0: never. Default: 30 when D-Bus started the daemon (DBUS_STARTER_BUS_TYPE is set; the shipped units and activation files pass 30 themselves), else 0: a daemon started by hand stays.",
            valueName: "seconds"
        ))
    var exitIdleTime: Double?
    @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel = "info"
    @Option(help: ArgumentHelp("Seconds between checkpoints of a running transfer.", visibility: .hidden))
    var checkpointInterval: Double = 1
    @Option(help: ArgumentHelp("Bytes between checkpoints of a running transfer.", visibility: .hidden))
    var checkpointBytes: Int64 = 64 << 20
    @Option(
        help: ArgumentHelp(
            "Print the introspection XML of an interface and exit (the files in dbus/).", visibility: .hidden))
    var printInterface: String?

    func validate() throws {
        let chosen = [session, system, address != nil].filter { $0 }.count
        guard chosen <= 1 else { throw ValidationError("choose one of --session, --system and --address") }
        guard maxRunning > 0, maxRunningPerSession > 0, maxConnections > 0, maxConnectionsPerHost > 0,
            maxTasksPerUser > 0, maxTasksPerApp > 0, maxSnapshotBytesPerUser >= 0, maxSessionsPerUser > 0,
            retentionDays >= 0,
            progressRate > 0, fileHelperTimeout > 0, checkpointInterval > 0, checkpointBytes > 0,
            (exitIdleTime ?? 0) >= 0, (exitIdleTime ?? 0).isFinite
        else {
            throw ValidationError("limits must be positive")
        }
        for network in denyNetwork where network != "none" && NetworkRange(network) == nil {
            throw ValidationError(
                "--deny-network \(network) is not a network in CIDR notation (e.g. 10.0.0.0/8, fd00::/8)")
        }
        if let caFile, (try? NIOSSLCertificate.fromPEMFile(caFile))?.isEmpty ?? true {
            throw ValidationError("--ca-file \(caFile) is not a readable file of PEM certificates")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level \(logLevel)") }
    }

    func run() async throws {
        if let name = printInterface {
            guard let interface = DownloadsInterfaces.all.first(where: { $0.name == name }) else {
                Downloadsd.exit(message: "no interface \(name)")
            }
            print(interface.introspectionDocument, terminator: "")
            return
        }
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "downloadsd")
        let bus: Connection.Bus = system ? .system : address.map { .address($0) } ?? .session
        let directory = stateDir ?? Downloadsd.defaultStateDirectory(system: system)

        // Everything the daemon creates is its own alone: the database, its WAL, the key.
        umask(0o077)
        if downloadsd_malloc_tuned() == 0 { logger.warning("glibc refused a malloc setting (CMallocTuning)") }
        do {
            for note in try StateDirectory.prepare(directory) { logger.warning("\(note)") }
        } catch {
            Downloadsd.exit(message: "downloadsd: the state directory \(directory) is unusable: \(error)")
        }
        let connection: Connection
        do {
            connection = try await Connection.open(bus, logger: logger)
        } catch {
            Downloadsd.exit(
                message:
                    "downloadsd: cannot connect to the \(system ? "system" : address == nil ? "session" : "given") bus: \(error)"
            )
        }
        await Downloadsd.lockStateDirectory(directory, connection: connection, logger: logger)
        let key: SymmetricKey
        let store: DownloadStore
        do {
            key = try StateDirectory.resumeDataKey(in: directory)
            store = try DownloadStore(path: directory + "/downloads.sqlite", secrets: StoreSecrets(rootKey: key))
        } catch {
            Downloadsd.exit(message: "downloadsd: the state directory \(directory) is unusable: \(error)")
        }

        var engineConfiguration = SessionManager.Configuration()
        engineConfiguration.maxRunning = maxRunning
        engineConfiguration.maxRunningPerSession = maxRunningPerSession
        engineConfiguration.maxConnections = maxConnections
        engineConfiguration.maxConnectionsPerHost = maxConnectionsPerHost
        engineConfiguration.checkpointInterval = checkpointInterval
        engineConfiguration.checkpointBytes = checkpointBytes
        engineConfiguration.caFile = caFile
        engineConfiguration.offerHTTP2 = http2
        engineConfiguration.originAttributes = originAttributes
        engineConfiguration.progressInterval = 1 / Double(progressRate)
        engineConfiguration.deniedNetworks =
            denyNetwork.isEmpty
            ? (system ? NetworkRange.linkLocal : [])
            : denyNetwork.compactMap { $0 == "none" ? nil : NetworkRange($0) }
        if !engineConfiguration.deniedNetworks.isEmpty {
            logger.info(
                "users other than root cannot download from \(engineConfiguration.deniedNetworks.map(\.description).joined(separator: ", "))"
            )
        }
        // An administrator's proxy (a systemd drop-in's Environment=), for tasks that give none.
        let proxies = ProxyEnvironment(ProcessInfo.processInfo.environment)
        engineConfiguration.proxyEnvironment = proxies
        for problem in proxies.problems { logger.warning("\(problem)") }
        if proxies.http != nil || proxies.https != nil {
            logger.info(
                """
                proxy for tasks without their own: http \(proxies.http?.description ?? "none"), \
                https \(proxies.https?.description ?? "none")\(proxies.noProxy.isEmpty ? "" : ", some hosts direct (no_proxy)")
                """)
        }
        // As root, every other user's files are touched by a helper running as that user.
        // Without the helper, only the daemon's own user (and root) may start downloads.
        var files: any FileAccessProvider = DirectFileAccess()
        var filesAsEveryUser = false
        if geteuid() == 0 {
            let helper = fileHelper ?? Downloadsd.defaultFileHelper()
            if access(helper, X_OK) == 0 {
                files = FileHelperPool(executable: helper, timeout: fileHelperTimeout)
                filesAsEveryUser = true
            } else {
                logger.warning("no file helper at \(helper) (--file-helper): other users' downloads are refused")
            }
        }
        if lanPeers != .off { engineConfiguration.peerFinder = AvahiPeerFinder(logger: logger) }
        let engine = SessionManager(
            configuration: engineConfiguration, resumeDataKey: key, files: files, logger: logger)
        // The engine owns the files; the service reaches them only through it.
        var serviceConfiguration = DownloadsService.Configuration()
        serviceConfiguration.systemBus = system
        serviceConfiguration.filesAsEveryUser = filesAsEveryUser
        serviceConfiguration.maxTasksPerUser = maxTasksPerUser
        serviceConfiguration.maxSnapshotBytesPerUser = maxSnapshotBytesPerUser
        serviceConfiguration.maxSnapshotBytesPerApp = maxSnapshotBytesPerUser / 2
        serviceConfiguration.maxTasksPerApp = maxTasksPerApp
        serviceConfiguration.maxSessionsPerUser = maxSessionsPerUser
        serviceConfiguration.retention = .seconds(retentionDays * 86_400)
        serviceConfiguration.afterGroupTaken = { downloadsd_release_free_memory() }
        var sharing: LANSharing?
        if lanPeers == .share {
            let lan = LANSharing(stateDirectory: directory, preferredPort: sharePort, files: files, logger: logger)
            engine.delegate.add(lan)
            serviceConfiguration.sharing = lan.index
            sharing = lan
        }
        let service = DownloadsService(
            connection: connection, engine: engine, store: store, configuration: serviceConfiguration, logger: logger
        )
        // The user's own process adds finished files to the user's Recent; root on the system
        // bus never writes a user's files (their agent does it there).
        if !system { engine.delegate.add(RecentFilesObserver(logger: logger)) }
        // Before the tasks are restored, so none starts on a network it may not use.
        let desktop =
            self.desktop
            ? await DesktopWatchers.start(
                engine: engine, logger: logger,
                networkChanged: sharing.map { sharing in { @Sendable status in sharing.networkChanged(status) } }) : nil
        do {
            try await service.start()
        } catch let error as BusError where error.name == BusError.nameTakenName {
            Downloadsd.exit(message: "downloadsd: \(error.message); is another downloadsd running?")
        } catch {
            Downloadsd.exit(message: "downloadsd: cannot start: \(error)")
        }
        let exitIdleTime = Self.idleTime(given: exitIdleTime, environment: ProcessInfo.processInfo.environment)
        let idleness =
            exitIdleTime > 0
            ? "exits after \(exitIdleTime.formatted()) s idle"
            : "not exiting when idle (--exit-idle-time SECONDS to exit; a daemon D-Bus starts exits after 30 s)"
        logger.info("serving org.example.Downloads as \(connection.uniqueName), state in \(directory); \(idleness)")

        // SIGTERM/SIGINT: checkpoint running transfers (they carry on at the next start) and exit.
        // Idle for --exit-idle-time: leave the bus first, answer what came before, and exit.
        let (stop, continuation) = AsyncStream.makeStream(of: String.self)
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { continuation.yield(signalNumber == SIGTERM ? "SIGTERM" : "SIGINT") }
            source.resume()
            SignalSources.keep(source)
        }
        connection.onDisconnect { continuation.yield("the bus connection was lost") }
        let idleReason = "idle for \(exitIdleTime.formatted()) s (--exit-idle-time)"
        let watchIdleness = { [exitIdleTime] () -> Task<Void, any Error>? in
            guard exitIdleTime > 0 else { return nil }
            return Task {
                try await IdleWatch(seconds: exitIdleTime).wait(for: service)
                continuation.yield(idleReason)
            }
        }
        var idleWatch = watchIdleness()
        for await reason in stop {
            idleWatch?.cancel()
            if reason == idleReason {
                logger.info("\(reason): leaving the bus; the next call starts the daemon again")
                guard await service.leaveBus() else {
                    logger.info("a call gave work before the name was released: staying")
                    idleWatch = watchIdleness()
                    continue
                }
            } else {
                logger.info("stopping (\(reason)): checkpointing transfers")
            }
            desktop?.stop()
            await service.shutdown()
            await sharing?.stop()
            if reason == idleReason, service.handOver() {
                logger.info("a call answered while leaving left work: the bus starts the next instance for it")
            } else {
                connection.flush()
            }
            connection.close()
            do {
                try store.checkpoint()
            } catch {
                logger.warning("store: the write-ahead log was not checkpointed: \(error)")
            }
            let saves = store.saveCounts
            logger.info("stopped (the store committed \(saves.writes) saves in \(saves.transactions) transactions)")
            return
        }
    }

    /// Takes the state directory's lock, waiting while the instance before this one leaves: it
    /// gave up the name, so a call that came meanwhile started this one. A name someone owns means
    /// another daemon serves it: this one leaves at once.
    static func lockStateDirectory(_ directory: String, connection: Connection, logger: Logger) async {
        let started = ContinuousClock.now
        while true {
            do {
                if try StateLock.take(in: directory) != nil { break }
            } catch {
                Downloadsd.exit(message: "downloadsd: the state directory \(directory) is unusable: \(error)")
            }
            if let owner = try? await connection.nameOwner(DownloadsAPI.busName) {
                Downloadsd.exit(
                    message:
                        "downloadsd: \(DownloadsAPI.busName) is owned by \(owner) and the state directory \(directory) is in use; is another downloadsd running?"
                )
            }
            guard ContinuousClock.now - started < .seconds(60) else {
                Downloadsd.exit(
                    message: "downloadsd: the state directory \(directory) stayed locked by another downloadsd for 60 s"
                )
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let waited = ContinuousClock.now - started
        if waited > .milliseconds(100) {
            logger.info(
                "waited \(waited.formatted(.units(allowed: [.milliseconds]))) for the previous instance to leave")
        }
    }

    /// `downloads-file-helper` in the directory of this executable.
    static func defaultFileHelper() -> String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent(
            "downloads-file-helper"
        ).path
    }

    static func defaultStateDirectory(system: Bool) -> String {
        if system { return "/var/lib/org.example.Downloads" }
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
        return base + "/org.example.Downloads"
    }

    static func exit(message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        Foundation.exit(1)
    }
}

/// Keeps the signal sources alive for the life of the process.
enum SignalSources {
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
    static func keep(_ source: DispatchSourceSignal) { sources.append(source) }
}
