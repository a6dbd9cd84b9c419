/// Why a queued task does not run yet (the task property `WaitingFor`): empty for every other
/// state. Not stored: it follows from the network and the limits whenever the daemon runs.
public enum WaitingFor: String, Sendable, Hashable, CaseIterable {
    case nothing = ""
    /// The limits on transfers running at once.
    case slot
    /// No connectivity (NetworkManager says so).
    case network
    /// The network is metered and the task has `allow_metered` false.
    case unmeteredNetwork = "unmetered-network"
    /// A running background task held below what it could take: other traffic is using the link.
    case yielding
    /// The task's `earliest_begin` has not come yet.
    case beginTime = "begin-time"
    /// The task has `requires_ac_power` and the machine runs on battery (UPower).
    case acPower = "ac-power"
    /// A background task while power-profiles-daemon's profile is `power-saver`.
    case powerSaver = "power-saver"
    /// Its app is asked a question the task met (`HandleChallenge`): a login, a fresh token.
    case app
}
