import DownloadModel

/// The question a task's app is asked now (the task waits queued, `WaitingFor` `app`), and which
/// one it is (`AnswerBook.nextQuestion`): an answer to an earlier question is not this one's.
struct AskedQuestion: Sendable {
    let challenge: Challenge
    let number: UInt64
}
