import GRDB
import NIOConcurrencyHelpers

/// Group commit for the engine's saves: the writes of one delivery batch (every task's events
/// queued while the last batch was delivered, `EventDelivery`) are committed in one
/// transaction, so a thousand small downloads ending together pay for a few commits (each with
/// its WAL locks, frames and wal-index updates) instead of one each, and no thread waits for
/// another's commit (issue 24; Benchmarks/RESULTS.md).
///
/// A group that fails as a whole (one write's error rolls back the transaction) is not reported
/// as each write's failure: every write of it is then made again alone, through `alone`, which
/// applies the store's full-disk rule (the reserve) to it as to any write.
final class CommitGroup: Sendable {
    private struct Counts {
        var writes = 0
        var commits = 0
    }

    private let counts = NIOLockedValueBox(Counts())
    private let database: any DatabaseWriter
    private let alone: @Sendable (StoreWrite) throws -> Void

    /// `alone(write)`: one write in a transaction of its own, with the store's rules.
    init(database: any DatabaseWriter, alone: @escaping @Sendable (StoreWrite) throws -> Void) {
        self.database = database
        self.alone = alone
    }

    /// Transactions committed so far, groups and writes alone.
    var commits: Int { counts.withLockedValue { $0.commits } }
    /// Writes made so far (committed or failed).
    var writes: Int { counts.withLockedValue { $0.writes } }

    /// Commits `batch`, in order; returns each write's result once all are committed (or failed).
    func commit(_ batch: [StoreWrite]) -> [Result<Void, any Error>] {
        guard !batch.isEmpty else { return [] }
        var transactions = batch.count
        var results: [Result<Void, any Error>]?
        if batch.count > 1 {
            do {
                try database.write { db in
                    for write in batch { try write.body(db) }
                }
                results = batch.map { _ in .success(()) }
                transactions = 1
            } catch {
                // Each alone: the failure is the one write's own, under the full-disk rule.
            }
        }
        let each = results ?? batch.map { write in Result { try alone(write) } }
        counts.withLockedValue { counts in
            counts.writes += batch.count
            counts.commits += transactions
        }
        return each
    }
}
