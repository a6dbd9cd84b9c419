import DownloadModel
import ShownText

/// The file's length a task was promised before any server answered: the caller's
/// `expected_size` (apt's `Expected-Checksum-FileSize`) or a followed Metalink document's
/// `<size>`. A server's file of another length fails the task, at the response's head when it
/// tells the length (`ResponseDecision`), else once the body ends (`TransferFinalizer`).
struct LengthPromise: Equatable, Sendable {
    let length: Int64
    /// Who promised it, for the failure's message.
    let by: String

    /// The task's promise, if it has one.
    init?(_ record: DownloadTaskRecord) {
        guard let promised = record.options.promisedLength else { return nil }
        length = promised
        by =
            record.options.metalinkURL.map { "the Metalink document at \(DisplayText.quoted($0, limit: 200))" }
            ?? "the caller's expected_size"
    }

    init(length: Int64, by: String) {
        self.length = length
        self.by = by
    }

    /// The failure's message when the server's file has `length` bytes.
    func broken(by length: Int64) -> String {
        "\(by) promises \(self.length) bytes; the server's file has \(length)"
    }
}
