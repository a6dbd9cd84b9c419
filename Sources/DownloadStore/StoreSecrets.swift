import Crypto
import DownloadModel

/// What of a task's options is a secret in the store (`SealedSecrets`: its headers, `proxy` and
/// client certificate): a row's `options` column keeps them sealed under a key derived from the
/// daemon's `resume-data.key` (which lives in its own file beside the database), bound to the
/// task's id, so a copy of the database alone shows neither their values nor their names, and a
/// sealed value moved to another row does not open.
public struct StoreSecrets: Sendable {
    private let secrets: SealedSecrets

    public init(rootKey: SymmetricKey) {
        secrets = SealedSecrets(rootKey: rootKey, purpose: "org.example.Downloads store secrets")
    }

    /// `options` without its secrets, and those sealed for task `id` (nil: it has none).
    func seal(_ options: DownloadOptions, task id: UInt64) throws -> (visible: DownloadOptions, sealed: String?) {
        try secrets.seal(options, binding: Self.binding(id))
    }

    /// Puts what `sealed` holds back into `options`; throws when it does not open (another
    /// key, another row, altered bytes).
    func open(_ sealed: String, into options: inout DownloadOptions, task id: UInt64) throws {
        do {
            try secrets.open(sealed, into: &options, binding: Self.binding(id))
        } catch {
            throw StoreError(error.message + " (was resume-data.key replaced?)")
        }
    }

    private static func binding(_ id: UInt64) -> [UInt8] {
        Array("task \(id)".utf8)
    }
}
