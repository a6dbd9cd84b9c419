import DBus

extension Connection {
    /// A method of avahi-daemon (`org.freedesktop.Avahi.INTERFACE` at `path`), never starting it
    /// (without avahi-daemon there is no local network to tell), within 5 s.
    func avahi(
        _ path: ObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = []
    ) async throws -> [DBusValue] {
        try await call(
            destination: "org.freedesktop.Avahi", path: path, interface: "org.freedesktop.Avahi.\(interface)",
            method: method, arguments: arguments, timeout: .seconds(5), autoStart: false)
    }
}
