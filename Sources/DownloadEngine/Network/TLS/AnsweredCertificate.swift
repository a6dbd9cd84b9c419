import DownloadModel

/// The client certificate a task's app gave (`client-certificate`) and the origin that asked for
/// it: presented to that origin alone, never to another a redirect leads to.
struct AnsweredCertificate: Sendable, Hashable {
    let origin: Source.Origin
    let certificate: ClientCertificate
}
