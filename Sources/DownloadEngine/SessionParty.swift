/// Who the scheduler shares places between: a user, or one sandboxed app of a user. The
/// service names a sandboxed app's sessions `APPID` U+001F `NAME` (`SessionKey`), so two apps
/// of one user are two parties, and one app cannot take its user's share from the others.
struct SessionParty: Hashable, Comparable, Sendable {
    let owner: UInt32
    let app: Substring

    init(_ session: SessionID) {
        owner = session.owner
        app = session.name.firstIndex(of: "\u{1F}").map { session.name[..<$0] } ?? ""
    }

    static func < (a: SessionParty, b: SessionParty) -> Bool {
        a.owner != b.owner ? a.owner < b.owner : a.app < b.app
    }
}
