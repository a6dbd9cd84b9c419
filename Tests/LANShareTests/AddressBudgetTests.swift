import LANShare
import XCTest

final class AddressBudgetTests: XCTestCase {
    func testAStormFromOneAddressIsRefusedWhileOthersAreServed() {
        let budget = AddressBudget(burst: 4, perSecond: 2, addresses: 2)
        XCTAssertEqual((0..<6).map { _ in budget.take("10.0.0.1", now: 0) }, [true, true, true, true, false, false])
        XCTAssertTrue(budget.take("10.0.0.2", now: 0), "another address has its own")
        XCTAssertTrue(budget.take("10.0.0.1", now: 0.5), "refilled at 2 a second")
        XCTAssertFalse(budget.take("10.0.0.1", now: 0.5))
        // A third address forgets the oldest: it starts full again, never more than `burst`.
        XCTAssertTrue(budget.take("10.0.0.3", now: 1))
        XCTAssertEqual((0..<5).map { _ in budget.take("10.0.0.2", now: 100) }, [true, true, true, true, false])
    }
}
