import DBus
import DownloadEngine
import DownloadModel
import Logging

/// Tells the engine what NetworkManager says of the network: `State` and `Connectivity` decide
/// whether transfers can reach anything, `Metered` whether they cost money. Any change it
/// announces (the standard `PropertiesChanged`, or the older NetworkManager-specific signals)
/// and NetworkManager appearing or leaving the bus make it read the three properties again, one
/// reading at a time. Without NetworkManager, a full, unmetered network.
public final class NetworkMonitor: Sendable {
    static let busName = "org.freedesktop.NetworkManager"
    static let path: ObjectPath = "/org/freedesktop/NetworkManager"

    private let engine: SessionManager
    private let follower: SystemServiceFollower<NetworkStatus>
    /// Told of each reading after the engine (the daemon's sharing: nothing offered on a metered
    /// network).
    private let also: (@Sendable (NetworkStatus) async -> Void)?

    public init(
        connection: Connection, engine: SessionManager, logger: Logger,
        also: (@Sendable (NetworkStatus) async -> Void)? = nil
    ) {
        self.engine = engine
        self.also = also
        follower = SystemServiceFollower(connection: connection, services: [(Self.busName, Self.path)], logger: logger)
    }

    /// Subscribes, reads the network once (returning after the engine has it) and keeps
    /// following it, NetworkManager's own older signals too (StateChanged, PropertiesChanged of
    /// its interface).
    public func start() async throws {
        try await follower.start(
            also: [MatchRule(sender: Self.busName, interface: Self.busName, path: Self.path)],
            read: { [follower] in await Self.read(follower) },
            apply: { [engine, also] status in
                await engine.setNetwork(status)
                await also?(status)
            })
    }

    public func stop() {
        follower.stop()
    }

    private static func read(_ follower: SystemServiceFollower<NetworkStatus>) async -> NetworkStatus {
        guard let properties = await follower.properties(of: busName, at: path, interface: busName) else {
            // Without NetworkManager, the network counts as full and unmetered.
            return NetworkStatus()
        }
        return status(
            state: properties["State"]?.uint32Value, connectivity: properties["Connectivity"]?.uint32Value,
            metered: properties["Metered"]?.uint32Value
        )
    }

    /// NetworkManager's values as the engine takes them. Offline: `State` asleep, disconnected,
    /// disconnecting or connecting (10–40), or `Connectivity` none (1) or behind a captive portal
    /// (2, where every request gets the portal's page). `limited` (3) still reaches the local
    /// network, and unknown values (0, or missing) decide nothing. Metered: `Metered` yes (1)
    /// or guess-yes (3).
    static func status(state: UInt32?, connectivity: UInt32?, metered: UInt32?) -> NetworkStatus {
        let offlineState = state.map { (10...40).contains($0) } ?? false
        let offlineConnectivity = connectivity == 1 || connectivity == 2
        return NetworkStatus(online: !offlineState && !offlineConnectivity, metered: metered == 1 || metered == 3)
    }
}
