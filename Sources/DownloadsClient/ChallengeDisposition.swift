import DBus
import Glibc

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
    /// `server-trust`: trust the certificate the server presented, for this task's run
    /// (`.useCredential(URLCredential(trust:))`).
    case trustServer
    /// `client-certificate`: a PEM file with the certificate and its key, opened here (as the
    /// app) and handed over as a descriptor; `passphrase` for an encrypted key.
    case useClientCertificate(path: String, passphrase: String?)
    /// `link-expired`: the task goes on at this URL (a freshly signed link), keeping its bytes.
    case useURL(String)

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
        case .trustServer:
            return [.string("use"), .vardict(["trust": .boolean(true)])]
        case .useClientCertificate(let path, let passphrase):
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return [.string("default"), .vardict([:])] }
            var answer: [String: DBusValue] = ["certificate": .unixFD(UnixFD(owning: fd))]
            if let passphrase { answer["passphrase"] = .string(passphrase) }
            return [.string("use"), .vardict(answer)]
        case .useURL(let url):
            return [.string("use"), .vardict(["url": .string(url)])]
        }
    }
}
