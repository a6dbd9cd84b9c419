/// How a session is named in the engine and the store: a host caller's session by its name, a
/// sandboxed app's as `APPID` U+001F `NAME`, so two apps' sessions of one name (each app's
/// "default") never meet: their tasks, `EventsFinished` and completion handlers stay apart.
/// Callers never see the prefix (`TaskOptions.checkedSession` refuses U+001F in a name).
enum SessionKey {
    static let separator: Character = "\u{1F}"

    static func stored(_ name: String, app: String) -> String {
        app.isEmpty ? name : app + String(separator) + name
    }

    /// The name callers gave (and see).
    static func shown(_ stored: String) -> String {
        guard let index = stored.firstIndex(of: separator) else { return stored }
        return String(stored[stored.index(after: index)...])
    }

    /// The app a stored session belongs to (`""` for a host caller's).
    static func app(_ stored: String) -> String {
        guard let index = stored.firstIndex(of: separator) else { return "" }
        return String(stored[..<index])
    }
}
