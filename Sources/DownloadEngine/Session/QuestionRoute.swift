import DownloadModel

/// How a question a task met is put to its app, decided in one `switch` over its kind
/// (`decide`): as it is, or as a client certificate once a handshake shows the server asks for
/// one; nil: not asked (the app does not answer that kind, or the question is not the app's).
enum QuestionRoute: Equatable {
    /// Asked as it is.
    case asIs
    /// A client certificate, when the server's handshake asks for one (`CertificateRequestProbe`)
    /// or its alert said so; otherwise asked as it is when `orAsIs` (a 403 of the task's own link),
    /// else not the app's question after all.
    case certificate(orAsIs: Bool)

    /// `challenge`, met by a task whose URL is `taskURL`; `answers` says which kinds its app
    /// answers.
    static func decide(
        _ challenge: Challenge, taskURL: String, answers: (Challenge.Kind) -> Bool
    ) -> QuestionRoute? {
        let source = Source(challenge.url)
        let secure = source?.isSecure == true
        switch challenge.kind {
        case .httpAuth, .proxyAuth, .serverTrust:
            return answers(challenge.kind) ? .asIs : nil
        case .clientCertificate:
            return secure && answers(.clientCertificate) ? .certificate(orAsIs: false) : nil
        case .linkExpired:
            // A link expired only when it is the task's own URL (not a redirect's target or a
            // mirror); a 403 of a TLS server may be a refusal of a client without a certificate.
            let ownLink =
                source?.withoutCredentials == Source(taskURL)?.withoutCredentials && answers(.linkExpired)
            if secure, challenge.status == 403, answers(.clientCertificate) { return .certificate(orAsIs: ownLink) }
            return ownLink ? .asIs : nil
        }
    }
}
