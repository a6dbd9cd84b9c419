@testable import DownloadEngine
import NIOConcurrencyHelpers
import XCTest

/// An upload's body is held to the task's limit by the download's rule (`BodyProgress`),
/// through `UploadBody.Pace`.
final class UploadPaceTests: XCTestCase {
    /// A limit lifted while a part waits ends the wait: at 1 byte a second the part would wait a
    /// day; the limit is read again at each step, and 0 lets it go.
    func testALimitLiftedWhileWaitingEndsTheWait() async throws {
        var pace = UploadBody.Pace()
        let reads = NIOLockedValueBox(0)
        try await pace.hold(after: 100_000) {
            reads.withLockedValue { count in
                count += 1
                return count <= 2 ? 1 : 0
            }
        }
        XCTAssertGreaterThanOrEqual(reads.withLockedValue { $0 }, 3, "the limit was read again while waiting")
    }

    /// Without a limit nothing waits: the limit is read once, there is no wait to step through.
    func testNoLimitDoesNotWait() async throws {
        var pace = UploadBody.Pace()
        let reads = NIOLockedValueBox(0)
        try await pace.hold(after: 1 << 30) {
            reads.withLockedValue { $0 += 1 }
            return 0
        }
        XCTAssertEqual(reads.withLockedValue { $0 }, 1)
    }
}
