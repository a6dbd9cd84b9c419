import DownloadModel

/// A question out to an app (`SessionManager+Challenges`) and the tasks that wait for its
/// answer: many tasks of one session that meet the same login at once ask it once, and the
/// answer is tried on each of them.
struct OpenQuestion {
    /// What makes two questions one: the session (its app answers), the kind, the scheme, the
    /// realm and the server; and for a link that expired, the task: a fresh link is one task's
    /// own (two tasks of a session on one server asked once took one answer's URL for both, and
    /// the second file became the first's bytes).
    struct Key: Hashable {
        var session: SessionID
        var kind: Challenge.Kind
        var scheme: String
        var realm: String
        var host: String
        var port: Int
        var task: UInt64?

        init(_ challenge: Challenge, of session: SessionID, task: UInt64) {
            self.session = session
            kind = challenge.kind
            scheme = challenge.scheme.lowercased()
            realm = challenge.realm
            host = challenge.host
            port = challenge.port
            self.task = challenge.kind == .linkExpired ? task : nil
        }
    }

    /// A task waiting for the answer: which of its questions this is, and the failure it has
    /// without an answer (the change its run reported).
    struct Waiter {
        let task: DownloadTask
        let question: UInt64
        let challenge: Challenge
        let failing: TaskChange
    }

    var waiters: [Waiter]
}
