@testable import DownloadsService
import NIOConcurrencyHelpers
import XCTest

/// `ClientCallSlots` alone: a party's cap, a user's, the total, and waiters of another user
/// never queued behind a user at its cap.
final class ClientCallSlotsTests: XCTestCase {
    typealias Party = ClientCallSlots.Party

    /// Holds `count` calls of `party` open until `gate` is opened; returns their tasks.
    func hold(
        _ slots: ClientCallSlots, _ party: Party, _ count: Int, until gate: NIOLockedValueBox<Bool>
    ) -> [Task<Void, Error>] {
        (0..<count).map { _ in
            Task {
                try await slots.withSlot(party) {
                    while !gate.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(2)) }
                }
            }
        }
    }

    func waitUntil(_ condition: @escaping () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("the condition did not hold within 10 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func testAUserAtItsCapWaitsAndOthersGoOn() async throws {
        let slots = ClientCallSlots(limits: .init(perParty: 3, perUser: 4, total: 6, reserve: 0))
        let gate = NIOLockedValueBox(false)
        let a = Party(uid: 1000, app: "")
        let aApp = Party(uid: 1000, app: "org.example.App")
        let b = Party(uid: 1001, app: "")
        let held = hold(slots, a, 10, until: gate)
        try await waitUntil { slots.inFlight(a) == 3 && slots.waiting == 7 }
        // The user's app has the user's one slot left; the user's host clients none.
        let heldApp = hold(slots, aApp, 3, until: gate)
        try await waitUntil { slots.inFlight(aApp) == 1 && slots.waiting == 9 }
        // Another user goes through at once, though a's calls wait before it.
        let answered = NIOLockedValueBox(0)
        try await slots.withSlot(b) { answered.withLockedValue { $0 += 1 } }
        XCTAssertEqual(answered.withLockedValue { $0 }, 1)
        XCTAssertEqual(slots.inFlight(), 4)
        // A cancelled waiter takes no slot and leaves the queue.
        let cancelled = Task { try await slots.withSlot(a) {} }
        try await waitUntil { slots.waiting == 10 }
        cancelled.cancel()
        do {
            try await cancelled.value
            XCTFail("a cancelled waiter throws")
        } catch is CancellationError {}
        XCTAssertEqual(slots.waiting, 9)
        // Everything ends: every waiter had its turn, and no slot is left taken.
        gate.withLockedValue { $0 = true }
        for task in held + heldApp { try await task.value }
        XCTAssertEqual(slots.inFlight(), 0)
        XCTAssertEqual(slots.waiting, 0)
    }

    /// Users who fill every ordinary slot between them still leave a newcomer the reserve.
    func testUsersWhoFillTheSlotsLeaveANewcomerTheReserve() async throws {
        let slots = ClientCallSlots(limits: .init(perParty: 5, perUser: 5, total: 8, reserve: 2, reservePerUser: 1))
        let gate = NIOLockedValueBox(false)
        let a = Party(uid: 1000, app: ""), b = Party(uid: 1001, app: "")
        let held = hold(slots, a, 4, until: gate) + hold(slots, b, 4, until: gate)
        try await waitUntil { slots.inFlight() == 8 }
        // A user that already holds its share of the reserve waits; a newcomer goes through.
        let waiting = hold(slots, a, 1, until: gate)
        try await waitUntil { slots.waiting == 1 }
        let answered = NIOLockedValueBox(0)
        try await slots.withSlot(Party(uid: 1002, app: "")) { answered.withLockedValue { $0 += 1 } }
        XCTAssertEqual(answered.withLockedValue { $0 }, 1)
        XCTAssertEqual(slots.waiting, 1)
        gate.withLockedValue { $0 = true }
        for task in held + waiting { try await task.value }
        XCTAssertEqual(slots.inFlight(), 0)
    }
}
