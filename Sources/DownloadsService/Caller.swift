import DownloadEngine
import DownloadModel

/// Who calls: the uid the bus reports and the app the calling process belongs to (`""` for a
/// host process, else a Flatpak app id or `snap.NAME`, `AppIdentity`). Ownership is (uid, app):
/// a sandboxed app sees only its own tasks; a host caller sees every task of its user (as
/// `flatpak ps` sees every app); root, on the host, every task.
struct Caller: Sendable, Hashable {
    let uid: UInt32
    let app: String

    var isSandboxed: Bool { !app.isEmpty }

    /// Whether a task (or session, handler, resume data) of `owner` and `app` exists for this caller.
    func sees(owner: UInt32, app taskApp: String) -> Bool {
        guard owner == uid || (uid == 0 && !isSandboxed) else { return false }
        return !isSandboxed || taskApp == app
    }

    func sees(_ task: TaskSnapshot) -> Bool { sees(owner: task.owner, app: task.record.app) }

    /// Whether `ListTasks(session)` lists the task: its own user's (root too lists only its own),
    /// seen by it, of `session` as its app shows it ("" for every session).
    func lists(_ record: DownloadTaskRecord, session: String) -> Bool {
        record.owner == uid && sees(owner: record.owner, app: record.app)
            && (session.isEmpty || SessionKey.shown(record.session) == session)
    }

    /// Whether this caller hears the signals of a task of `owner` and `app` sent by unicast: its
    /// owner's host connections and that app's own. (Root's connections hear only their own.)
    func hears(owner: UInt32, app taskApp: String) -> Bool {
        uid == owner && (!isSandboxed || taskApp == app)
    }
}
