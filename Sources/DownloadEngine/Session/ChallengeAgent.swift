import DownloadModel

/// Who answers the questions tasks meet (`Challenge`): the service, which carries each to the
/// object the task's app registered (`HandleChallenge`), as NetworkManager's `SecretAgent` and
/// BlueZ's `Agent1` are asked.
public protocol ChallengeAgent: Sendable {
    /// Whether the task's app answers questions of `kind` (it registered for them). Asked
    /// before the task leaves running: a task nobody would answer fails at once, as it always did.
    func answers(_ kind: Challenge.Kind, for task: TaskSnapshot) -> Bool

    /// Asks the task's app; `refused`: its answers the server already refused for this task.
    /// Returns the app's answer, or `.performDefault` when it gave none in time, replied with
    /// an error or gave one that is refused.
    func ask(_ challenge: Challenge, refused: Int, for task: TaskSnapshot) async -> ChallengeAnswer
}
