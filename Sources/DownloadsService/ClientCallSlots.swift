import NIOConcurrencyHelpers

/// The service's own calls to clients in flight (`HandleChallenge`, `HandleEventsForBackgroundSession`).
/// Each is a pending reply of the service's one connection, and a bus lets a connection wait for
/// only so many (the system bus: 128, `max_replies_per_connection`): one user whose handler never
/// answers would otherwise hold them all, and every other user's questions and completion calls
/// would fail `LimitsExceeded`. So a party (a user's app, or its host clients) holds at most
/// `perParty` calls, a user at most `perUser`, everyone together at most `total`; past `total`,
/// `reserve` more are kept for users that hold fewer than `reservePerUser` (so users who fill
/// the rest between them still leave a newcomer its calls). A call beyond waits, unasked and
/// holding no reply, and takes the first slot that ends and fits it (another user's waiting
/// calls never queue behind a user at its cap).
final class ClientCallSlots: Sendable {
    struct Limits: Sendable {
        var perParty = 12
        var perUser = 16
        var total = 96
        /// `total` + `reserve` stays below the system bus's 128, leaving room for the service's
        /// calls to the bus itself.
        var reserve = 16
        var reservePerUser = 2
    }

    /// Whose calls they are: the user and app the called handler belongs to, as a `Caller` is.
    typealias Party = Caller

    private struct Waiter {
        let id: UInt64
        let party: Party
        let continuation: CheckedContinuation<Void, Error>
    }

    private struct State {
        var byParty: [Party: Int] = [:]
        var byUser: [UInt32: Int] = [:]
        var total = 0
        var waiters: [Waiter] = []
        var nextID: UInt64 = 1

        func fits(_ party: Party, _ limits: Limits) -> Bool {
            let user = byUser[party.uid, default: 0]
            guard byParty[party, default: 0] < limits.perParty, user < limits.perUser else { return false }
            return total < limits.total || (total < limits.total + limits.reserve && user < limits.reservePerUser)
        }

        mutating func take(_ party: Party) {
            byParty[party, default: 0] += 1
            byUser[party.uid, default: 0] += 1
            total += 1
        }

        mutating func give(_ party: Party) {
            byParty[party, default: 1] -= 1
            if byParty[party] == 0 { byParty[party] = nil }
            byUser[party.uid, default: 1] -= 1
            if byUser[party.uid] == 0 { byUser[party.uid] = nil }
            total -= 1
        }
    }

    let limits: Limits
    private let state = NIOLockedValueBox(State())

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// How many calls `party` has in flight, and everyone together (for tests and the log).
    func inFlight(_ party: Party? = nil) -> Int {
        state.withLockedValue { state in party.map { state.byParty[$0, default: 0] } ?? state.total }
    }

    /// How many calls wait for a slot.
    var waiting: Int { state.withLockedValue { $0.waiters.count } }

    /// `body` with a slot of `party`'s, waiting for one first when it has none free. A task
    /// cancelled while it waits throws `CancellationError` and takes none.
    func withSlot<T: Sendable>(_ party: Party, _ body: () async throws -> T) async throws -> T {
        try await acquire(party)
        defer { release(party) }
        return try await body()
    }

    private func acquire(_ party: Party) async throws {
        let id = state.withLockedValue { state -> UInt64? in
            if state.waiters.isEmpty || !state.waiters.contains(where: { $0.party.uid == party.uid }),
                state.fits(party, limits)
            {
                state.take(party)
                return nil
            }
            defer { state.nextID += 1 }
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let cancelled = state.withLockedValue { state -> Bool in
                    if Task.isCancelled { return true }
                    state.waiters.append(Waiter(id: id, party: party, continuation: continuation))
                    // A slot may have ended between the first look and now.
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
                wakeWaiters()
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    private func release(_ party: Party) {
        state.withLockedValue { $0.give(party) }
        wakeWaiters()
    }

    /// Gives free slots to the waiters they fit, oldest first.
    private func wakeWaiters() {
        let woken = state.withLockedValue { state -> [Waiter] in
            var woken: [Waiter] = []
            var index = 0
            while index < state.waiters.count {
                let waiter = state.waiters[index]
                if state.fits(waiter.party, limits) {
                    state.take(waiter.party)
                    woken.append(state.waiters.remove(at: index))
                } else {
                    index += 1
                }
            }
            return woken
        }
        for waiter in woken { waiter.continuation.resume() }
    }
}
