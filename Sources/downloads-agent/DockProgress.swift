import DBus

/// Progress on an app's dock or task-bar entry: the `com.canonical.Unity.LauncherEntry` signal
/// that Dash to Dock, Plank, Latte and Plasma's task manager listen to.
struct DockProgress {
    static let interface = "com.canonical.Unity.LauncherEntry"
    static let path: ObjectPath = "/org/example/Downloads/Agent"

    let connection: Connection

    /// `count` active downloads for `desktopEntry`, `progress` (0…1) when their sizes are known.
    func update(desktopEntry: String, count: Int, progress: Double?) {
        let properties: [String: DBusValue] = [
            "progress": .double(progress ?? 0), "progress-visible": .boolean(progress != nil && count > 0),
            "count": .int64(Int64(count)), "count-visible": .boolean(count > 0),
        ]
        try? connection.emitSignal(
            path: Self.path, interface: Self.interface, name: "Update",
            arguments: [.string("application://" + desktopEntry), .vardict(properties)]
        )
    }
}
