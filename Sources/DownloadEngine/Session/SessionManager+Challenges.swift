import DownloadModel
import ProxyRules
import ShownText

/// A task that meets a question only its app can answer (`Challenge`: a login, an expired
/// token) asks it instead of failing, when its app registered to answer such questions
/// (`ChallengeAgent`): it waits queued (`WaitingFor` `app`), holding no place, and goes on from
/// its durable bytes with the answer, or fails as it would have without one.
extension SessionManager {
    /// Answers refused for one task before it fails as it would have (the third is the last).
    static let maxRefusedAnswers = 3
    /// The pause before asking again after a refused answer, doubled for each one after.
    static let refusedAnswerPause: Duration = .milliseconds(500)

    /// Changes the answer book (under the table lock, `table` being the locked table) and keeps
    /// `answersKept` true while the book holds anything.
    func changeAnswers<T>(in table: inout TaskTable, _ change: (inout AnswerBook) -> T) -> T {
        let result = change(&table.answers)
        answersKept.store(!table.answers.isEmpty, ordering: .sequentiallyConsistent)
        return result
    }

    /// What `task` of `session` holds of its app's answers, for a run that starts (no lock taken
    /// while the book is empty).
    func answers(for task: UInt64, in session: SessionID) -> AppAnswers {
        guard answersKept.load(ordering: .sequentiallyConsistent) else { return .none }
        return state.withLockedValue { $0.answers.answers(for: task, in: session) }
    }

    /// Who answers the questions (the service); none until set.
    public func setChallengeAgent(_ agent: any ChallengeAgent) {
        state.withLockedValue { $0.challengeAgent = agent }
    }

    /// `task`'s run ended with `error`, which asks `challenge`: when its app answers such
    /// questions, the task waits for its answer (the snapshot after); nil when it is not asked
    /// (nobody answers, or the server refused enough answers): `failing` (the change that
    /// reported the failure) goes on.
    func ask(
        _ task: DownloadTask, _ challenge: Challenge, error: DownloadError, failing change: TaskChange
    ) -> TaskSnapshot? {
        guard let agent = state.withLockedValue({ $0.challengeAgent }) else { return nil }
        let asking = task.snapshot
        guard
            let route = QuestionRoute.decide(
                challenge, taskURL: task.record.url, answers: { agent.answers($0, for: asking) })
        else { return nil }
        let mayWantCertificate = if case .certificate = route { true } else { false }
        let session = asking.sessionID
        let (refused, question) = state.withLockedValue { table in
            changeAnswers(in: &table) { book in
                (
                    book.refused(challenge, mayWantCertificate: mayWantCertificate, task: task.id, in: session),
                    book.nextQuestion()
                )
            }
        }
        guard refused < Self.maxRefusedAnswers else {
            logger.info("task \(task.id): the server refused \(refused) answers of its app; it fails")
            return nil
        }
        let moved = move(
            task, to: .queued, from: [.running, .retrying],
            { state in state.asking = AskedQuestion(challenge: challenge, number: question) },
            then: { delegate, task, snapshot in delegate.waitingChanged(task, snapshot) })
        guard let snapshot = moved else { return nil }
        // The same question out already (another task of the session met the same login): this
        // task waits for that answer.
        let key = OpenQuestion.Key(challenge, of: snapshot.sessionID, task: task.id)
        let waiter = OpenQuestion.Waiter(task: task, question: question, challenge: challenge, failing: change)
        let first = state.withLockedValue { table -> Bool in
            if table.questions[key] != nil {
                table.questions[key]?.waiters.append(waiter)
                return false
            }
            table.questions[key] = OpenQuestion(waiters: [waiter])
            return true
        }
        logger.info(
            "task \(task.id): \(error); \(first ? "asking its app" : "waiting for its app's answer to the same question") (\(challenge.kind.rawValue), \(DisplayText.quoted(challenge.scheme, limit: 40)) realm \(DisplayText.quoted(challenge.realm, limit: 80)))"
        )
        guard first else { return snapshot }
        Task { [self] in
            // After a refusal, a pause before the app is asked again: a server refusing at once
            // never makes the task a loop of requests and questions.
            if refused > 0 { try? await Task.sleep(for: Self.refusedAnswerPause * (1 << (refused - 1))) }
            let answer: ChallengeAnswer
            switch route {
            case .asIs:
                answer = await agent.ask(challenge, refused: refused, for: snapshot)
            case .certificate(let orAsIs):
                let context = requestContext(of: task, task.record, answers: .none, requests: RequestsOut())
                let asked = await RequestSender(owner: self, context: context).certificateRequest(at: challenge.url)
                // TLS 1.3's `certificate_required` says so even where the probe (TLS 1.2) cannot look.
                let required = challenge.error == Challenge.certificateRequiredAlert
                if asked != nil || required {
                    // Only a server that asks for a certificate is answered with one.
                    var question = challenge
                    question.kind = .clientCertificate
                    question.issuers = asked?.issuers ?? []
                    question.error = ""
                    answer = await agent.ask(question, refused: refused, for: snapshot)
                } else if orAsIs {
                    answer = await agent.ask(challenge, refused: refused, for: snapshot)
                } else {
                    answer = .performDefault(why: "its server does not ask for a client certificate")
                }
            }
            let waiters = state.withLockedValue { $0.questions.removeValue(forKey: key)?.waiters ?? [] }
            for waiter in waiters {
                await answered(
                    waiter.task, question: waiter.question, waiter.challenge, answer, failing: waiter.failing)
            }
        }
        return snapshot
    }

    /// The task that waited for its app takes its answer (`keep`, in the book before any run
    /// can read it) and is queued again, when it still waits for that answer (`open`).
    private func goOn(
        _ task: DownloadTask, open: @escaping @Sendable (DownloadTask.State) -> Bool,
        keep: @escaping @Sendable (inout AnswerBook, SessionID) -> Void
    ) {
        let conditions = state.withLockedValue { $0.scheduler.conditions }
        var taken = false
        report(
            task,
            { state in
                guard open(state) else { return }
                state.asking = nil
                state.wait(on: conditions)
                taken = true
            },
            events: { [self] delegate, task, snapshot in
                // Queued again in the task's event order, as a Resume queues it.
                guard taken else { return }
                delegate.waitingChanged(task, snapshot)
                state.withLockedValue { table in
                    changeAnswers(in: &table) { keep(&$0, snapshot.sessionID) }
                    table.scheduler.enqueue(snapshot.record)
                }
            })
        logger.info("task \(task.id): its app answered; it goes on")
        schedule()
    }

    /// What the app's `credentials` give the task that asked `challenge`, by its kind (one
    /// `switch`): a fresh link (set as `SetURL` sets it, the task's own), a client certificate, a
    /// certificate trusted, or a login (headers; a proxy's user and password; a Digest's counters),
    /// as what the task takes into the book when it goes on; thrown: why the answer is refused.
    private func accepted(
        _ credentials: ChallengeAnswer.Credentials, to challenge: Challenge, of task: DownloadTask,
        open: @escaping @Sendable (DownloadTask.State) -> Bool
    ) async throws -> @Sendable (inout AnswerBook, SessionID) -> Void {
        guard let origin = Source(challenge.url)?.origin else {
            throw DownloadError.internalError("a challenge without its URL")
        }
        let id = task.id
        switch challenge.kind {
        case .linkExpired where credentials.certificate == nil:
            guard let url = credentials.url, task.withState({ open($0) }) else {
                throw DownloadError.invalidArgument("a link-expired question is answered with a url")
            }
            _ = try await setURL(id, to: url)
            return { book, _ in book.renewedLink(of: id) }
        case .clientCertificate, .linkExpired:
            guard let certificate = credentials.certificate else {
                throw DownloadError.invalidArgument("a client-certificate question is answered with a certificate")
            }
            let answer = AnsweredCertificate(origin: origin, certificate: certificate)
            return { book, session in book.take(.certificate(answer), task: id, in: session) }
        case .serverTrust:
            guard credentials.trust, let certificate = challenge.certificates.first else {
                throw DownloadError.invalidArgument("a server-trust question is answered with trust true")
            }
            let answer = TrustedServer(origin: origin, certificate: certificate)
            return { book, session in book.take(.trusted(answer), task: id, in: session) }
        case .httpAuth, .proxyAuth:
            let headers = try credentials.headers(answering: challenge)
            var proxy: ProxySetting.Credentials?
            if challenge.kind == .proxyAuth {
                guard let user = credentials.user, let password = credentials.password else {
                    throw DownloadError.invalidArgument("a proxy is answered with a user and a password")
                }
                proxy = ProxySetting.Credentials(user: user, password: password)
            }
            var digest: DigestCredentials?
            if challenge.kind == .httpAuth, challenge.scheme.lowercased() == "digest", let user = credentials.user {
                digest = try DigestCredentials(user: user, password: credentials.password ?? "", answering: challenge)
            }
            let answer = AnsweredCredentials(
                origin: origin, headers: headers, challenge: challenge, proxy: proxy, digest: digest)
            return { book, session in book.take(.credentials(answer), task: id, in: session) }
        }
    }

    /// The app answered `question` of `task` (nothing, when the task no longer waits for it).
    private func answered(
        _ task: DownloadTask, question: UInt64, _ challenge: Challenge, _ answer: ChallengeAnswer,
        failing change: TaskChange
    ) async {
        let open: @Sendable (DownloadTask.State) -> Bool = { state in
            state.record.state == .queued && state.asking?.number == question
        }
        var answer = answer
        if case .use(let credentials) = answer {
            do {
                let keep = try await accepted(credentials, to: challenge, of: task, open: open)
                goOn(task, open: open, keep: keep)
                return
            } catch let refusal as DownloadError {
                answer = .performDefault(why: "its answer is refused: \(refusal.message)")
            } catch {
                answer = .performDefault(why: "its answer is refused: \(error)")
            }
        }
        switch answer {
        case .use:
            return
        case .cancel:
            guard task.withState({ open($0) }) else { return }
            logger.info("task \(task.id): its app cancelled it")
            try? await cancel(task.id)
        case .performDefault(let why):
            logger.info("task \(task.id): \(why); it fails as it would have")
            guard let step = change.step(resumeDataKey: self.key), let next = step.next else { return }
            let failed = move(
                task, to: next, from: [.queued], provided: { _ in task.withState { open($0) } },
                { _ = step.change(&$0) }, then: step.events)
            // Its group may have to stop its other files, as after any failure.
            if failed != nil, task.record.group != 0 { groupFileFailed(task) }
        }
    }
}
