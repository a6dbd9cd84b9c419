@testable import DownloadEngine
import NIOConcurrencyHelpers
import XCTest

/// A finish's two waits (the file's sync, its events' delivery): the step after them runs once,
/// after both, or at once with the first failure and never again.
final class TwoWaitsTests: XCTestCase {
    private struct Broken: Error {}

    private func counted() -> (TwoWaits, NIOLockedValueBox<[String]>) {
        let heard = NIOLockedValueBox<[String]>([])
        let waits = TwoWaits { error in heard.withLockedValue { $0.append(error == nil ? "both" : "failed") } }
        return (waits, heard)
    }

    func testTheStepRunsOnceAfterBoth() {
        let (waits, heard) = counted()
        waits.done()
        XCTAssertEqual(heard.withLockedValue { $0 }, [], "not after one")
        waits.done()
        waits.done()
        XCTAssertEqual(heard.withLockedValue { $0 }, ["both"])
    }

    func testAFailureEndsItAtOnceAndTheOthersEndIsIgnored() {
        let (waits, heard) = counted()
        waits.failed(Broken())
        XCTAssertEqual(heard.withLockedValue { $0 }, ["failed"])
        waits.done()
        waits.done()
        waits.failed(Broken())
        XCTAssertEqual(heard.withLockedValue { $0 }, ["failed"])
    }

    func testAFailureAfterOneIsDoneStillEndsIt() {
        let (waits, heard) = counted()
        waits.done()
        waits.failed(Broken())
        waits.done()
        XCTAssertEqual(heard.withLockedValue { $0 }, ["failed"])
    }

    func testFromTwoThreadsTheStepRunsOnce() {
        for _ in 0..<200 {
            let (waits, heard) = counted()
            DispatchQueue.concurrentPerform(iterations: 2) { _ in waits.done() }
            XCTAssertEqual(heard.withLockedValue { $0 }, ["both"])
        }
    }
}
