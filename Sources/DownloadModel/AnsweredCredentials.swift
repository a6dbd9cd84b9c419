/// The credentials an app's answer to a challenge gave a task (`ChallengeAnswer.use`), as the
/// headers they are sent as: only to `origin` (the server that asked), with the task's own
/// headers (replacing those of the same names). Secrets: kept in memory only, never stored nor
/// put in resume data, forgotten when the task ends; a daemon that restarts asks the app again.
public struct AnsweredCredentials: Sendable, Hashable {
    public var origin: Source.Origin
    public var headers: [String: String]
    /// The question they answered: the same one asked again means the server refused them.
    public var challenge: Challenge

    public init(origin: Source.Origin, headers: [String: String], challenge: Challenge) {
        self.origin = origin
        self.headers = headers
        self.challenge = challenge
    }
}
