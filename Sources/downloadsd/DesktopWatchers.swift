import DBus
import DownloadEngine
import DownloadModel
import DownloadsService
import Logging

/// logind and NetworkManager, always on the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured),
/// whichever bus the API is served on. Without a system bus, nothing is watched.
struct DesktopWatchers {
    let connection: Connection
    let inhibitor: SleepInhibitor
    let network: NetworkMonitor

    static func start(engine: SessionManager, logger: Logger) async -> DesktopWatchers? {
        let connection: Connection
        do {
            connection = try await Connection.open(.system, logger: logger)
        } catch {
            logger.info("no system bus (\(error)): sleep and the network are not followed")
            return nil
        }
        let inhibitor = SleepInhibitor(connection: connection, engine: engine, logger: logger)
        let network = NetworkMonitor(connection: connection, engine: engine, logger: logger)
        engine.delegate.add(inhibitor)
        do {
            try await inhibitor.start()
            try await network.start()
        } catch {
            logger.warning("cannot follow logind and NetworkManager: \(error)")
        }
        return DesktopWatchers(connection: connection, inhibitor: inhibitor, network: network)
    }

    func stop() {
        network.stop()
        inhibitor.stop()
        connection.close()
    }
}
