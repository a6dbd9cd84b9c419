import LANShare
import XCTest

/// A Passim peer is asked for a hash at most once an hour (Passim's cooldown), per address and hash.
final class PassimLedgerTests: XCTestCase {
    func testAPassimPeerIsAskedForAHashOnceAnHour() {
        let ledger = PassimLedger()
        let now = ContinuousClock.now
        let hash = String(repeating: "ab", count: 32)
        XCTAssertTrue(ledger.mayAsk("192.168.1.5", hash, now: now))
        XCTAssertFalse(ledger.mayAsk("192.168.1.5", hash, now: now + .seconds(3599)), "not again within the hour")
        XCTAssertTrue(ledger.mayAsk("192.168.1.6", hash, now: now), "another peer")
        XCTAssertTrue(ledger.mayAsk("192.168.1.5", String(repeating: "cd", count: 32), now: now), "another hash")
        XCTAssertTrue(ledger.mayAsk("192.168.1.5", hash, now: now + .seconds(3600)), "an hour later")
    }
}
