import DBus
import DownloadEngine
import DownloadModel
import Logging

/// Tells the engine what UPower and power-profiles-daemon say of the machine's power: UPower's
/// `OnBattery` (tasks with `requires_ac_power` wait while it is true) and the active profile
/// (background tasks wait under `power-saver`), read from `org.freedesktop.UPower.PowerProfiles`
/// (power-profiles-daemon 0.20 and later) or `net.hadess.PowerProfiles` (the older name, Debian
/// 12's). Any `PropertiesChanged` of theirs and either appearing or leaving the bus make it read
/// them again, one reading at a time. Without UPower the machine counts as on mains power; without
/// power-profiles-daemon, no profile holds anything back.
public final class PowerMonitor: Sendable {
    static let upower = "org.freedesktop.UPower"
    static let upowerPath: ObjectPath = "/org/freedesktop/UPower"
    /// power-profiles-daemon's names, newest first: (bus name and interface, path).
    static let profiles: [(name: String, path: ObjectPath)] = [
        ("org.freedesktop.UPower.PowerProfiles", "/org/freedesktop/UPower/PowerProfiles"),
        ("net.hadess.PowerProfiles", "/net/hadess/PowerProfiles"),
    ]

    private let connection: Connection
    private let engine: SessionManager
    private let logger: Logger
    private let readings = WorkTrigger()

    public init(connection: Connection, engine: SessionManager, logger: Logger) {
        self.connection = connection
        self.engine = engine
        self.logger = logger
    }

    /// Subscribes, reads the power once (returning after the engine has it) and keeps following it.
    public func start() async throws {
        try await readings.follow([(Self.upower, Self.upowerPath)] + Self.profiles, on: connection)
        readings.run { [weak self] in
            guard let self else { return }
            await self.engine.setPower(await self.read())
        }
        await engine.setPower(await read())
    }

    public func stop() {
        readings.finish()
    }

    private func read() async -> PowerStatus {
        let onBattery = await property("OnBattery", of: Self.upower, at: Self.upowerPath)?.boolValue ?? false
        var profile: String?
        for (name, path) in Self.profiles {
            profile = await property("ActiveProfile", of: name, at: path)?.stringValue
            if profile != nil { break }
        }
        return PowerStatus(onBattery: onBattery, powerSaver: profile == "power-saver")
    }

    /// One property of a service that may not be there (nil then: it is not started for this).
    private func property(_ property: String, of name: String, at path: ObjectPath) async -> DBusValue? {
        do {
            let reply = try await connection.call(
                destination: name, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                arguments: [.string(name), .string(property)], timeout: .seconds(10), autoStart: false
            )
            return reply.first?.variantValue
        } catch {
            logger.debug("\(name) is not answering (\(error)): \(property) is not known")
            return nil
        }
    }
}
