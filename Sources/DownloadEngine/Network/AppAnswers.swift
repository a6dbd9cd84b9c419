import DownloadModel

/// What a task's app answered that its run's requests carry, taken when the run starts
/// (`AnswerBook`, Session/): credentials for the server or proxy that asked, a certificate it
/// trusted (`ServerTrust`), a client certificate it gave (`ClientIdentity`). Each goes only to
/// the origin it was given for. In memory only: never in a record, a snapshot or resume data.
struct AppAnswers: Sendable {
    var credentials: AnsweredCredentials?
    var trusted: TrustedServer?
    var certificate: AnsweredCertificate?

    /// A run of a task whose app answered nothing.
    static let none = AppAnswers()

    /// The login answered for `origin`: only its own, never where a redirect led.
    func credentials(at origin: Source.Origin) -> AnsweredCredentials? {
        credentials.flatMap { $0.origin == origin ? $0 : nil }
    }

    /// The certificate trusted at `origin`.
    func trusted(at origin: Source.Origin) -> TrustedServer? {
        trusted.flatMap { $0.origin == origin ? $0 : nil }
    }

    /// The client certificate presented to `origin`.
    func certificate(at origin: Source.Origin) -> ClientCertificate? {
        certificate.flatMap { $0.origin == origin ? $0.certificate : nil }
    }
}
