import DownloadModel

/// What apps answered, kept per session and origin beside the questions still out
/// (`TaskTable.questions`): the credentials, the trusted certificate and the client certificate an
/// app gave for an origin, each with the tasks that took it; the tasks given a fresh link
/// (`link-expired`: a link is one task's own); and the answers each task's servers refused.
///
/// None of it is a task's state: a task's lock never guards it, a snapshot never carries it, and a
/// run takes what its task holds when it starts (`answers(for:in:)`, an `AppAnswers`). As before
/// the table, a task holds at most one answer of each kind, forgets them at its pause and end
/// (`forget`: the next run asks again; a wait for the network keeps them), and a task of another
/// session never uses them. Guarded by the manager's table lock (`TaskTable`).
struct AnswerBook: Sendable {
    /// An app's session and the origin its answer was for.
    struct Key: Hashable, Sendable {
        let session: SessionID
        let origin: Source.Origin
    }

    /// One answer and the tasks that took it.
    struct Held<Value: Sendable>: Sendable {
        var value: Value
        var tasks: Set<UInt64>
    }

    /// What a session's app answered for one origin.
    struct Entry: Sendable {
        var credentials: Held<AnsweredCredentials>?
        var trusted: Held<TrustedServer>?
        var certificate: Held<AnsweredCertificate>?

        var isEmpty: Bool { credentials == nil && trusted == nil && certificate == nil }
    }

    /// An answer an app gave, as the book keeps it.
    enum Answer: Sendable {
        case credentials(AnsweredCredentials)
        case trusted(TrustedServer)
        case certificate(AnsweredCertificate)

        var origin: Source.Origin {
            switch self {
            case .credentials(let answer): answer.origin
            case .trusted(let answer): answer.origin
            case .certificate(let answer): answer.origin
            }
        }
    }

    private var entries: [Key: Entry] = [:]
    private var renewedLinks: Set<UInt64> = []
    private var refusals: [UInt64: Int] = [:]
    private var lastQuestion: UInt64 = 0

    /// Nothing answered, no fresh link, no refusal: no task has anything here.
    var isEmpty: Bool { entries.isEmpty && renewedLinks.isEmpty && refusals.isEmpty }

    /// Tells one question from the next, whichever task asks it: an answer to an earlier question
    /// (before a Pause and a Resume) is not this one's.
    mutating func nextQuestion() -> UInt64 {
        lastQuestion += 1
        return lastQuestion
    }

    /// What `task` of `session` holds, for its next run's requests.
    func answers(for task: UInt64, in session: SessionID) -> AppAnswers {
        var answers = AppAnswers()
        for (key, entry) in entries where key.session == session {
            if let held = entry.credentials, held.tasks.contains(task) { answers.credentials = held.value }
            if let held = entry.trusted, held.tasks.contains(task) { answers.trusted = held.value }
            if let held = entry.certificate, held.tasks.contains(task) { answers.certificate = held.value }
        }
        return answers
    }

    /// `task` of `session` takes its app's `answer`, instead of any it held of that kind. A newer
    /// answer of the session's app for the same origin is what every task that took one uses next.
    mutating func take(_ answer: Answer, task: UInt64, in session: SessionID) {
        let key = Key(session: session, origin: answer.origin)
        switch answer {
        case .credentials(let value): hold(\.credentials, value, at: key, task: task)
        case .trusted(let value): hold(\.trusted, value, at: key, task: task)
        case .certificate(let value): hold(\.certificate, value, at: key, task: task)
        }
    }

    /// `task` holds `value` as its answer of one kind at `key`, and no other of that kind.
    private mutating func hold<Value: Sendable>(
        _ kind: WritableKeyPath<Entry, Held<Value>?>, _ value: Value, at key: Key, task: UInt64
    ) {
        release(kind, of: task, in: key.session)
        var entry = entries[key] ?? Entry()
        entry[keyPath: kind] = Held(value: value, tasks: (entry[keyPath: kind]?.tasks ?? []).union([task]))
        entries[key] = entry
    }

    /// `task` was given a fresh link by its app: the same question again is a refusal.
    mutating func renewedLink(of task: UInt64) {
        renewedLinks.insert(task)
    }

    /// `task` of `session` asks `challenge` again: the answers its server refused by asking again
    /// are let go and counted (a login asked again after one, whatever realm it names now; trust
    /// asked again of the origin trusted; a certificate asked for after one was given, when
    /// `mayWantCertificate`; a fresh link that expired too). Returns the task's refusals so far.
    mutating func refused(
        _ challenge: Challenge, mayWantCertificate: Bool, task: UInt64, in session: SessionID
    ) -> Int {
        var refused = refusals[task] ?? 0
        let login = challenge.kind == .httpAuth || challenge.kind == .proxyAuth
        if login, release(\.credentials, of: task, in: session) { refused += 1 }
        if challenge.kind == .serverTrust, let origin = Source(challenge.url)?.origin,
            release(\.trusted, of: task, in: session, at: origin)
        {
            refused += 1
        }
        if mayWantCertificate, release(\.certificate, of: task, in: session) { refused += 1 }
        if challenge.kind == .linkExpired, renewedLinks.remove(task) != nil { refused += 1 }
        if refused > 0 { refusals[task] = refused }
        return refused
    }

    /// `task` paused or ended: it holds no answer and no refusal any more.
    mutating func forget(_ task: UInt64, in session: SessionID) {
        release(\.credentials, of: task, in: session)
        release(\.trusted, of: task, in: session)
        release(\.certificate, of: task, in: session)
        renewedLinks.remove(task)
        refusals[task] = nil
    }

    /// Lets go of `task`'s answer of one kind (at `origin` only, when given); an answer no task
    /// holds is dropped. Whether the task held one.
    @discardableResult
    private mutating func release<Value: Sendable>(
        _ kind: WritableKeyPath<Entry, Held<Value>?>, of task: UInt64, in session: SessionID,
        at origin: Source.Origin? = nil
    ) -> Bool {
        var held = false
        for key in entries.keys where key.session == session && (origin == nil || key.origin == origin) {
            guard var entry = entries[key], var answer = entry[keyPath: kind], answer.tasks.remove(task) != nil
            else { continue }
            held = true
            entry[keyPath: kind] = answer.tasks.isEmpty ? nil : answer
            entries[key] = entry.isEmpty ? nil : entry
        }
        return held
    }
}
