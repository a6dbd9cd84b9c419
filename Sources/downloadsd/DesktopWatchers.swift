import DBus
import DownloadEngine
import DownloadModel
import DownloadsService
import Logging

/// logind, NetworkManager, UPower and power-profiles-daemon, always on the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured),
/// whichever bus the API is served on. Without a system bus, nothing is watched.
struct DesktopWatchers {
    let connection: Connection
    let inhibitor: SleepInhibitor
    let network: NetworkMonitor
    let power: PowerMonitor

    /// `networkChanged`: told of each of NetworkManager's readings after the engine.
    static func start(
        engine: SessionManager, logger: Logger, networkChanged: (@Sendable (NetworkStatus) async -> Void)? = nil
    ) async -> DesktopWatchers? {
        let connection: Connection
        do {
            connection = try await Connection.open(.system, logger: logger)
        } catch {
            logger.info("no system bus (\(error)): sleep, the network and power are not followed")
            return nil
        }
        let inhibitor = SleepInhibitor(connection: connection, engine: engine, logger: logger)
        let network = NetworkMonitor(connection: connection, engine: engine, logger: logger, also: networkChanged)
        let power = PowerMonitor(connection: connection, engine: engine, logger: logger)
        engine.delegate.add(inhibitor)
        do {
            try await inhibitor.start()
            try await network.start()
            try await power.start()
        } catch {
            logger.warning("cannot follow logind, NetworkManager and UPower: \(error)")
        }
        return DesktopWatchers(connection: connection, inhibitor: inhibitor, network: network, power: power)
    }

    func stop() {
        network.stop()
        power.stop()
        inhibitor.stop()
        connection.close()
    }
}
