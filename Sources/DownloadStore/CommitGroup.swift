import Dispatch
import GRDB
import NIOConcurrencyHelpers

/// Group commit for the saves that reach the store from many tasks' event queues at once: a
/// caller whose write arrives while another transaction is being committed waits, and the
/// writes that waited meanwhile are committed together in the next one, made by one of their
/// callers (the leader) on its own thread. Each caller still returns only once its own write is
/// committed (or failed), so what a save promises is unchanged: the observers after the store
/// see only what is durable. What changes is the count of transactions (each with its WAL
/// locks, frames and wal-index updates) when many small downloads end together (issue 24;
/// Benchmarks/RESULTS.md).
///
/// A group that fails as a whole (one write's error rolls back the transaction) is not
/// reported as each caller's failure: every write of it is then made again alone, through
/// `alone`, which applies the store's full-disk rule (the reserve) to it as to any write.
///
/// A waiting caller blocks on its own semaphore, never on a shared condition: the leader wakes
/// exactly the callers whose writes it committed, and hands the lead to the first write that
/// arrived during its commit.
final class CommitGroup: Sendable {
    typealias Body = (Database) throws -> Void

    private final class Entry: @unchecked Sendable {
        let body: Body
        let mayUseReserve: Bool
        let wake = DispatchSemaphore(value: 0)
        /// Set by the leader under `state`'s lock.
        var result: Result<Void, any Error>?

        init(body: @escaping Body, mayUseReserve: Bool) {
            self.body = body
            self.mayUseReserve = mayUseReserve
        }
    }

    private struct State {
        var leading = false
        var waiting: [Entry] = []
        /// Writes made and transactions committed (for tests and the benchmark's breakdown).
        var writes = 0
        var commits = 0
    }

    private let state = NIOLockedValueBox(State())
    private let database: any DatabaseWriter
    private let alone: @Sendable (Bool, Body) throws -> Void

    /// `alone(mayUseReserve, body)`: one write in a transaction of its own, with the store's rules.
    init(database: any DatabaseWriter, alone: @escaping @Sendable (Bool, Body) throws -> Void) {
        self.database = database
        self.alone = alone
    }

    /// Writes waiting for the transaction being committed now to end.
    var waitingCount: Int { state.withLockedValue { $0.waiting.count } }
    /// Transactions committed so far, groups and writes alone.
    var commits: Int { state.withLockedValue { $0.commits } }
    /// Writes made so far (committed or failed).
    var writes: Int { state.withLockedValue { $0.writes } }

    /// Commits `body` with whatever other writes are waiting; returns once it is committed.
    func write(mayUseReserve: Bool, _ body: @escaping Body) throws {
        let entry = Entry(body: body, mayUseReserve: mayUseReserve)
        let leads = state.withLockedValue { state -> Bool in
            state.waiting.append(entry)
            guard !state.leading else { return false }
            state.leading = true
            return true
        }
        if !leads {
            entry.wake.wait()
            // Woken with its result, or handed the lead (its write is still waiting).
            if let result = state.withLockedValue({ _ in entry.result }) { return try result.get() }
        }
        let batch = state.withLockedValue { state -> [Entry] in
            defer { state.waiting = [] }
            return state.waiting
        }
        let results = commit(batch)
        let next = state.withLockedValue { state -> Entry? in
            for (waiter, result) in zip(batch, results.each) { waiter.result = result }
            state.commits += results.transactions
            state.writes += batch.count
            guard let next = state.waiting.first else {
                state.leading = false
                return nil
            }
            return next
        }
        for waiter in batch where waiter !== entry { waiter.wake.signal() }
        next?.wake.signal()
        return try results.each[batch.firstIndex { $0 === entry } ?? 0].get()
    }

    /// Each write's result, and the transactions it took (one, or one per write when the group failed).
    private func commit(_ batch: [Entry]) -> (each: [Result<Void, any Error>], transactions: Int) {
        if batch.count > 1 {
            do {
                try database.write { db in
                    for entry in batch { try entry.body(db) }
                }
                return (batch.map { _ in .success(()) }, 1)
            } catch {
                // Each alone: the failure is the one write's own, under the full-disk rule.
            }
        }
        return (batch.map { entry in Result { try alone(entry.mayUseReserve, entry.body) } }, batch.count)
    }
}
