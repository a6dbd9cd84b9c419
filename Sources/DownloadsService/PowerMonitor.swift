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

    private let engine: SessionManager
    private let follower: SystemServiceFollower<PowerStatus>

    public init(connection: Connection, engine: SessionManager, logger: Logger) {
        self.engine = engine
        follower = SystemServiceFollower(
            connection: connection, services: [(Self.upower, Self.upowerPath)] + Self.profiles, logger: logger)
    }

    /// Subscribes, reads the power once (returning after the engine has it) and keeps following it.
    public func start() async throws {
        try await follower.start(
            read: { [follower] in await Self.read(follower) }, apply: { [engine] in await engine.setPower($0) })
    }

    public func stop() {
        follower.stop()
    }

    private static func read(_ follower: SystemServiceFollower<PowerStatus>) async -> PowerStatus {
        let onBattery = await follower.property("OnBattery", of: upower, at: upowerPath)?.boolValue ?? false
        var profile: String?
        for (name, path) in profiles {
            profile = await follower.property("ActiveProfile", of: name, at: path)?.stringValue
            if profile != nil { break }
        }
        return PowerStatus(onBattery: onBattery, powerSaver: profile == "power-saver")
    }
}
