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

    /// The client certificate for a request to `url`: only its own origin's, never where a
    /// redirect led.
    func certificate(for url: String) -> ClientCertificate? {
        certificate.flatMap { $0.origin == Source(url)?.origin ? $0.certificate : nil }
    }
}
