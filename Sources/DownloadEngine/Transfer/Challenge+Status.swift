import DownloadModel
import NIOHTTP1

extension Challenge {
    /// The question a refusal asks, the one mapping from a status to a question for downloads
    /// (`ResponseDecision`) and uploads (`UploadRun.refusal`) alike: a 401 with
    /// `WWW-Authenticate` is a login; a 401 without it, a 403 or a 410 a signed link that expired
    /// (a 403 may also be a TLS server's refusal of a client without a certificate, which
    /// `SessionManager.ask` tells apart with a probe); a 400 a TLS server that wants a client
    /// certificate and refuses the request instead of the handshake (nginx's, asked of the app
    /// only once a handshake shows the server asks for one). nil: no question, the failure stands.
    static func asked(by status: Int, headers: HTTPHeaders) -> Challenge? {
        switch status {
        case 401:
            guard let (scheme, realm, parameters) = HTTPHeaderRules.authChallenge(headers) else {
                return Challenge(kind: .linkExpired, scheme: "", realm: "", status: status)
            }
            var challenge = Challenge(kind: .httpAuth, scheme: scheme, realm: realm, status: status)
            challenge.parameters = parameters
            return challenge
        case 400:
            return Challenge(kind: .clientCertificate, scheme: "", realm: "", status: status)
        case 403, 410:
            return Challenge(kind: .linkExpired, scheme: "", realm: "", status: status)
        default:
            return nil
        }
    }
}
