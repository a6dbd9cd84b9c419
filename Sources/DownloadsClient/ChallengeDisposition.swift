import DBus

/// What the delegate answers to a `DownloadChallenge` (`URLSession.AuthChallengeDisposition`
/// with its credential).
public enum ChallengeDisposition: Sendable, Hashable {
    /// `.useCredential(URLCredential(user:password:…))`: sent as Basic to the server (or the
    /// proxy) that asked.
    case useCredential(user: String, password: String)
    /// Headers that replace the task's own of the same names (a fresh bearer token).
    case useHeaders([String: String])
    /// As with no answer: the task fails as it would have.
    case performDefaultHandling
    /// The task is cancelled.
    case cancelAuthenticationChallenge

    /// `HandleChallenge`'s reply `(s disposition, a{sv} answer)`.
    var reply: [DBusValue] {
        switch self {
        case .useCredential(let user, let password):
            return [.string("use"), .vardict(["user": .string(user), "password": .string(password)])]
        case .useHeaders(let headers):
            return [.string("use"), .vardict(["headers": .stringDict(headers)])]
        case .performDefaultHandling:
            return [.string("default"), .vardict([:])]
        case .cancelAuthenticationChallenge:
            return [.string("cancel"), .vardict([:])]
        }
    }
}
