import DBus

extension WorkTrigger {
    /// Pokes on every `PropertiesChanged` of the system services `services` (a bus name and the
    /// object path whose properties are read) and whenever one of them appears or leaves the bus:
    /// what a watcher that reads their properties again needs to hear. `ownerChanged` hears which
    /// service changed hands (and its new owner, "" when it left) before the poke.
    func follow(
        _ services: [(name: String, path: ObjectPath)], on connection: Connection,
        ownerChanged: @escaping @Sendable (_ name: String, _ owner: String) -> Void = { _, _ in }
    ) async throws {
        let poke: @Sendable (Message) -> Void = { [weak self] _ in self?.poke() }
        for service in services {
            try await connection.subscribe(
                MatchRule(
                    sender: service.name, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                    path: service.path
                ), handler: poke)
        }
        let names = Set(services.map(\.name))
        try await connection.onNameOwnerChanged { [weak self] name, _, new in
            guard names.contains(name) else { return }
            ownerChanged(name, new)
            self?.poke()
        }
    }
}
