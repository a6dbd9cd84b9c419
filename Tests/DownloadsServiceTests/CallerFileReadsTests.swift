import DBus
import Dispatch
@testable import DownloadsService
import XCTest

/// `CallerFileReads` alone, with reads that block until the test lets them go: a caller's stuck
/// reads fail at the deadline and hold its slots, its next one is refused at once, and another
/// app of the same user, or another user, still reads.
final class CallerFileReadsTests: XCTestCase {
    func testAStuckCallerHoldsOnlyItsOwnSlots() async throws {
        let reads = CallerFileReads(perCaller: 2, perUser: 3)
        let host = Caller(uid: 1000, app: "")
        let app = Caller(uid: 1000, app: "org.example.Player")
        let other = Caller(uid: 1001, app: "")
        let gate = DispatchSemaphore(value: 0)
        func stuck(_ caller: Caller) async -> String {
            do {
                _ = try await reads.run(for: caller, what: "the file", deadline: .milliseconds(200)) {
                    gate.wait()
                    return 0
                }
                return "read"
            } catch let error as BusError {
                return error.name + ": " + error.message
            } catch {
                return "\(error)"
            }
        }
        async let first = stuck(host)
        async let second = stuck(host)
        let ended = [await first, await second]
        for text in ended {
            XCTAssertTrue(text.hasPrefix("org.example.Downloads.Error.FileError: the file did not answer"), text)
        }
        XCTAssertEqual(reads.count(host), 2, "a stuck read keeps its slot until its file answers")
        // The host caller's third read is refused at once; the user's app and another user read.
        let refused = await stuck(host)
        XCTAssertTrue(refused.contains("2 reads of your files have not returned yet"), refused)
        let appRead = try await reads.run(for: app, what: "the file") { 7 }
        XCTAssertEqual(appRead, 7)
        let otherRead = try await reads.run(for: other, what: "the file") { 8 }
        XCTAssertEqual(otherRead, 8)
        // The files answer at last: the slots are given back.
        gate.signal()
        gate.signal()
        let deadline = ContinuousClock.now + .seconds(10)
        while reads.count(host) > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertEqual(reads.count(host), 0)
        let again = try await reads.run(for: host, what: "the file") { 9 }
        XCTAssertEqual(again, 9)
    }
}
