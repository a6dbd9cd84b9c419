extension Downloadsd {
    /// The idle time in force: the one given, else 30 s when D-Bus started the daemon (it sets
    /// `DBUS_STARTER_BUS_TYPE` for what it activates, and the next call activates it again), else
    /// 0: a daemon started by hand (in a terminal, a script, a test) has nothing to start it again
    /// and stays. The shipped units and activation files pass 30 themselves (systemd's activation
    /// sets no `DBUS_STARTER_*`).
    static func idleTime(given: Double?, environment: [String: String]) -> Double {
        if let given { return given }
        return environment["DBUS_STARTER_BUS_TYPE"].map { !$0.isEmpty } == true ? 30 : 0
    }
}
