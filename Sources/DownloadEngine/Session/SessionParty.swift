import DownloadModel
/// Who the scheduler shares places between: a user, or one sandboxed app of a user (a task's
/// `DownloadTaskRecord.app`), so two apps of one user are two parties, and one app cannot take
/// its user's share from the others (or from the user's own host tasks).
struct SessionParty: Hashable, Comparable, Sendable {
    let owner: UInt32
    let app: String

    static func < (a: SessionParty, b: SessionParty) -> Bool {
        a.owner != b.owner ? a.owner < b.owner : a.app < b.app
    }
}
