import DBus
import Logging

/// Follows system services whose properties the engine is told (NetworkManager; UPower and
/// power-profiles-daemon) or whose state it keeps in step with (logind's sleep inhibitor): `read`
/// reads them once at `start` (which returns after `apply` took that reading) and again, one
/// reading at a time, coalesced, whenever one of them announces a change (`PropertiesChanged`,
/// or a rule of its own), appears on the bus or leaves it, or its user asks (`poke`). What the
/// watchers share; each says only which services, how to read them and what it does with it.
final class SystemServiceFollower<Reading: Sendable>: Sendable {
    let connection: Connection
    let logger: Logger
    private let services: [(name: String, path: ObjectPath)]
    private let readings = WorkTrigger()

    init(connection: Connection, services: [(name: String, path: ObjectPath)], logger: Logger) {
        self.connection = connection
        self.services = services
        self.logger = logger
    }

    /// Subscribes (to `rules` too: a service's own change signals), takes the first reading and
    /// keeps following; `ownerChanged` hears a service change hands before the reading it brings.
    /// `waitsForFirst` false: the first reading is made in turn like any other, after `start`
    /// returned (a watcher whose reading calls a service that may be slow to answer).
    func start(
        also rules: [MatchRule] = [], read: @escaping @Sendable () async -> Reading,
        apply: @escaping @Sendable (Reading) async -> Void,
        ownerChanged: @escaping @Sendable (_ name: String, _ owner: String) -> Void = { _, _ in },
        waitsForFirst: Bool = true
    ) async throws {
        try await readings.follow(services, on: connection, ownerChanged: ownerChanged)
        for rule in rules {
            try await connection.subscribe(rule) { [readings] _ in readings.poke() }
        }
        readings.run { await apply(await read()) }
        if waitsForFirst { await apply(await read()) } else { readings.poke() }
    }

    /// Another reading, soon (coalesced with any other on its way).
    func poke() {
        readings.poke()
    }

    func stop() {
        readings.finish()
    }

    /// `GetAll` of `interface` at a service that may not be there: nil then (it is never started
    /// for this).
    func properties(of name: String, at path: ObjectPath, interface: String) async -> [String: DBusValue]? {
        do {
            let reply = try await connection.call(
                destination: name, path: path, interface: "org.freedesktop.DBus.Properties", method: "GetAll",
                arguments: [.string(interface)], timeout: .seconds(10), autoStart: false)
            return reply.first?.vardictValue ?? [:]
        } catch {
            logger.debug("\(name) is not answering (\(error))")
            return nil
        }
    }

    /// One property of a service that may not be there: nil then.
    func property(_ property: String, of name: String, at path: ObjectPath) async -> DBusValue? {
        do {
            let reply = try await connection.call(
                destination: name, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                arguments: [.string(name), .string(property)], timeout: .seconds(10), autoStart: false)
            return reply.first?.variantValue
        } catch {
            logger.debug("\(name) is not answering (\(error)): \(property) is not known")
            return nil
        }
    }
}
