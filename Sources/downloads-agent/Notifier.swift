import DBus

/// Desktop notifications (`org.freedesktop.Notifications`): one per task, replaced when the
/// task ends again (say, failed, then resumed and finished).
struct Notifier {
    static let busName = "org.freedesktop.Notifications"
    static let path: ObjectPath = "/org/freedesktop/Notifications"

    let connection: Connection

    /// Returns the notification's id (0 when nobody shows notifications).
    func notify(
        replacing: UInt32?, summary: String, body: String, icon: String, category: String, desktopEntry: String?,
        actions: [String]
    ) async -> UInt32 {
        var hints: [String: DBusValue] = ["category": .string(category), "urgency": .byte(1)]
        // The hint names the desktop file without its suffix.
        if let desktopEntry { hints["desktop-entry"] = .string(String(desktopEntry.dropLast(".desktop".count))) }
        do {
            let reply = try await connection.call(
                destination: Self.busName, path: Self.path, interface: Self.busName, method: "Notify",
                arguments: [
                    .string("Downloads"), .uint32(replacing ?? 0), .string(icon), .string(summary), .string(body),
                    .array(element: .string, actions.map { .string($0) }), .vardict(hints), .int32(-1),
                ], timeout: .seconds(10)
            )
            return reply.first?.uint32Value ?? 0
        } catch {
            return 0
        }
    }
}
