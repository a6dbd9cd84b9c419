import DownloadsAPI
import NIOConcurrencyHelpers

/// What the service's copies of files to upload (`snapshot`) may take in its state directory,
/// for each user and each sandboxed app on the system bus: bytes in root's directory that no
/// disk quota of the user's counts, so they are counted here. A copy counts from the call that
/// makes it (reserved before a byte is written, so calls in parallel cannot overrun the budget)
/// until its task no longer holds it (finished or cancelled: the copy is removed; a failed task
/// keeps it for `Resume` until it expires or is cancelled).
final class SnapshotBudget: Sendable {
    struct Owner: Hashable {
        var uid: UInt32
        var app: String
    }

    let perUser: Int64
    let perApp: Int64
    private let reserved = NIOLockedValueBox([Owner: Int64]())

    init(perUser: Int64, perApp: Int64) {
        self.perUser = perUser
        self.perApp = perApp
    }

    /// Reserves `bytes` for `owner`'s copy, beside `held` (what the user's tasks hold, all of its
    /// apps together) and `heldByApp` (the app's own), or throws `QuotaExceeded`. The caller
    /// releases it once the task is recorded (its copy then counts as held) or the call failed.
    func reserve(_ bytes: Int64, for owner: Owner, held: Int64, heldByApp: Int64) throws {
        try reserved.withLockedValue { reserved in
            let userReserved = reserved.filter { $0.key.uid == owner.uid }.values.reduce(0, +)
            let user = held + userReserved + bytes
            guard user <= perUser else {
                throw DownloadsErrorName.quotaExceeded.error(
                    "the service's copies of your files to upload would come to \(user) bytes; at most \(perUser) "
                        + "(--max-snapshot-bytes-per-user): upload without snapshot, or cancel failed uploads that keep a copy"
                )
            }
            if !owner.app.isEmpty {
                let app = heldByApp + reserved[owner, default: 0] + bytes
                guard app <= perApp else {
                    throw DownloadsErrorName.quotaExceeded.error(
                        "the service's copies of this app's files to upload would come to \(app) bytes; at most \(perApp)"
                    )
                }
            }
            reserved[owner, default: 0] += bytes
        }
    }

    func release(_ bytes: Int64, for owner: Owner) {
        reserved.withLockedValue { reserved in
            let left = reserved[owner, default: 0] - bytes
            reserved[owner] = left > 0 ? left : nil
        }
    }
}
