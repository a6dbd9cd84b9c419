import DBus

extension WorkTrigger {
    /// Pokes on every `PropertiesChanged` of the system services `services` (a bus name and the
    /// object path whose properties are read) and whenever one of them appears or leaves the bus:
    /// what a watcher that reads their properties again needs to hear.
    func follow(_ services: [(name: String, path: ObjectPath)], on connection: Connection) async throws {
        let poke: @Sendable (Message) -> Void = { [weak self] _ in self?.poke() }
        for service in services {
            try await connection.subscribe(
                MatchRule(
                    sender: service.name, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                    path: service.path
                ), handler: poke)
        }
        let names = Set(services.map(\.name))
        try await connection.onNameOwnerChanged { [weak self] name, _, _ in
            if names.contains(name) { self?.poke() }
        }
    }
}
