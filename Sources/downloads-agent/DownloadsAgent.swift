import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import Dispatch
import Logging
import RecentFiles
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

@main
struct DownloadsAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downloads-agent",
        abstract: "Shows your org.example.Downloads tasks on the desktop: KDE job views, dock progress, notifications.",
        discussion: """
            One runs in each desktop session (a systemd user unit, and XDG autostart). It follows your tasks on the \
            service's bus (by default the system bus when the service is there, else the session bus) and talks to \
            the desktop on the session bus. It never starts the service.
            """
    )

    static let busName = "org.example.Downloads.Agent"

    @Flag(name: .customLong("user"), help: "Follow the service on your session bus.") var user = false
    @Flag(name: .customLong("system"), help: "Follow the system service.") var system = false
    @Option(
        name: .customLong("address"),
        help: ArgumentHelp("Follow the service on the bus at this D-Bus address.", valueName: "address"))
    var address: String?
    @Flag(
        inversion: .prefixedNo,
        help: ArgumentHelp(
            "Add finished downloads that asked for it (add_to_recent) to your recently used files. Default: when following the system service, which runs as root and leaves your files to you (a service on your session bus adds them itself)."
        ))
    var recent: Bool?
    @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel = "info"

    func validate() throws {
        guard [user, system, address != nil].filter({ $0 }).count <= 1 else {
            throw ValidationError("choose one of --user, --system and --address")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level \(logLevel)") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "downloads-agent")
        // xdg-open children are reaped by the kernel.
        signal(SIGCHLD, SIG_IGN)
        let desktop: Connection
        do {
            desktop = try await Connection.open(.session, logger: logger)
        } catch {
            fail("downloads-agent: no session bus (\(error)); it runs inside a desktop session")
        }
        // One agent per session: the systemd unit and XDG autostart may both try.
        do {
            try await desktop.requestName(Self.busName)
        } catch {
            logger.info("another downloads-agent runs in this session (\(Self.busName) is taken)")
            return
        }
        let bus = await serviceBus()
        let proxy: DownloadsProxy
        do {
            proxy = try await DownloadsProxy.connect(bus)
        } catch {
            fail("downloads-agent: cannot reach the service's bus: \(error)")
        }
        let agent = Agent(
            proxy: proxy, desktop: desktop, logger: logger, recent: (recent ?? (bus == .system)) ? RecentFiles() : nil)
        do {
            try await agent.start()
        } catch {
            fail("downloads-agent: \(error)")
        }
        logger.info(
            "following downloads on the \(bus == .system ? "system" : bus == .session ? "session" : "given") bus")
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { agent.stop() }
            source.resume()
            SignalSources.keep(source)
        }
        // The desktop session (or the service's bus) went: so does the agent.
        desktop.onDisconnect { agent.stop() }
        proxy.connection.onDisconnect { agent.stop() }
        await agent.run()
        proxy.close()
        desktop.close()
    }

    /// The chosen bus, or the system bus when the service is there (running or activatable).
    private func serviceBus() async -> DownloadsProxy.Bus {
        if system { return .system }
        if let address { return .address(address) }
        if user { return .session }
        guard let connection = try? await Connection.open(.system) else { return .session }
        defer { connection.close() }
        if (try? await connection.nameOwner(DownloadsAPI.busName)) != nil { return .system }
        let names = try? await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: "ListActivatableNames"
        )
        let activatable = names?.first?.stringArrayValue?.contains(DownloadsAPI.busName) ?? false
        return activatable ? .system : .session
    }

    private func fail(_ message: String) -> Never {
        Output.write(message + "\n", to: STDERR_FILENO)
        Glibc.exit(1)
    }
}

/// Keeps the signal sources alive for the life of the process.
enum SignalSources {
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
    static func keep(_ source: DispatchSourceSignal) { sources.append(source) }
}
