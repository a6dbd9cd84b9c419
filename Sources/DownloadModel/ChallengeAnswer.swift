import Foundation
import ShownText

/// What an app answered to a `Challenge` (`HandleChallenge`'s disposition and answer).
public enum ChallengeAnswer: Sendable, Hashable {
    /// Go on with these credentials.
    case use(Credentials)
    /// As with no app to ask: the task fails as it would have (`default`, no answer in time, an
    /// error reply, an answer refused).
    case performDefault(why: String)
    /// The task is cancelled.
    case cancel

    /// What an answer gives a task: a user and password (the server's `Basic` scheme), or
    /// headers that replace the task's own of the same names (a fresh bearer token). Secrets:
    /// kept in memory only, for the task's life and the answer's origin (`DownloadTaskRecord.answered`).
    public struct Credentials: Sendable, Hashable {
        public var user: String?
        public var password: String?
        public var headers: [String: String]
        /// For `server-trust`: trust the certificate the server presented, for this task's life.
        public var trust: Bool
        /// For `client-certificate`: the certificate and key to present (read from the app's descriptor).
        public var certificate: ClientCertificate?
        /// For `link-expired`: the task's new URL (as `SetURL`), already checked.
        public var url: String?

        public init(
            user: String? = nil, password: String? = nil, headers: [String: String] = [:], trust: Bool = false,
            certificate: ClientCertificate? = nil, url: String? = nil
        ) {
            self.url = url
            self.user = user
            self.password = password
            self.headers = headers
            self.trust = trust
            self.certificate = certificate
        }
    }
}

extension ChallengeAnswer.Credentials {
    /// The headers these credentials are sent as to the server that asked `challenge`: a user
    /// and password as `Basic` (RFC 7617; for `Digest` they are `DigestCredentials`, made per
    /// request), then `headers` (replacing the task's own of the same names). Throws a reason
    /// when they cannot answer it.
    public func headers(answering challenge: Challenge) throws(DownloadError) -> [String: String] {
        var result = headers
        let digest = challenge.kind == .httpAuth && challenge.scheme.lowercased() == "digest"
        if user != nil || password != nil, !digest {
            guard challenge.scheme.lowercased() == "basic" else {
                throw .invalidArgument(
                    "the server asks for \(DisplayText.quoted(challenge.scheme, limit: 40)); a user and password are sent only to Basic and Digest (give headers instead)"
                )
            }
            let pair = "\(user ?? ""):\(password ?? "")"
            guard !pair.contains(where: { $0.isNewline }), !(user ?? "").contains(":") else {
                throw .invalidArgument("a user may hold no colon, and neither may hold a line break")
            }
            let field = challenge.kind == .proxyAuth ? "Proxy-Authorization" : "Authorization"
            result[field] = "Basic " + Data(pair.utf8).base64EncodedString()
        }
        for (name, value) in result { try HTTPFieldRules.checkCallerHeader(name: name, value: value) }
        guard !result.isEmpty || (digest && user != nil) else {
            throw .invalidArgument("the answer holds no credentials (user, password, headers)")
        }
        return result
    }
}
