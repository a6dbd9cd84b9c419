import DownloadModel

/// A certificate a task's app trusted (`server-trust`, `trust` true): this task trusts it at
/// `origin` for as long as it runs. Kept beside the task's record, never in it (as an answered
/// login is), so it is neither stored nor put in resume data: a restarted daemon asks again.
struct TrustedServer: Sendable, Hashable {
    let origin: Source.Origin
    /// The server's own certificate, DER, as it presented it when the app was asked.
    let certificate: [UInt8]
}
