@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import XCTest

/// The rules of a body as it arrives (`BodyProgress`), one at a time, on a clock the test moves.
final class BodyProgressTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func at(_ seconds: Double) -> NIODeadline {
        t0 + .nanoseconds(Int64(seconds * 1e9))
    }

    private func machine(
        connect: Int64 = 10, stall: Int64 = 30, lowSpeed: UInt64 = 0, lowSpeedTime: Int64 = 60,
        checkpointBytes: Int64 = 1000, checkpointInterval: Int64 = 1
    ) -> BodyProgress {
        BodyProgress(
            settings: .init(
                connectTimeout: .seconds(connect), stallTimeout: .seconds(stall), lowSpeedLimit: lowSpeed,
                lowSpeedTime: .seconds(lowSpeedTime), checkpointBytes: checkpointBytes,
                checkpointInterval: .seconds(checkpointInterval)
            ), now: t0)
    }

    func testACheckpointIsDueEveryCheckpointBytes() {
        var body = machine(checkpointBytes: 1000, checkpointInterval: 3600)
        body.headReceived(writingAt: 500, limit: 0, at: at(0))
        XCTAssertFalse(body.bodyPart(600, at: at(0.1)))
        XCTAssertTrue(body.bodyPart(400, at: at(0.2)), "1,000 bytes since the head")
        XCTAssertEqual(body.position, 1500, "counted from the response's offset")
        XCTAssertFalse(body.bodyPart(999, at: at(0.3)), "counted again from the checkpoint")
        XCTAssertTrue(body.bodyPart(1, at: at(0.4)))
    }

    func testACheckpointIsDueEveryCheckpointIntervalHoweverFewTheBytes() {
        var body = machine(checkpointBytes: 1 << 40, checkpointInterval: 1)
        body.headReceived(writingAt: 0, limit: 0, at: at(0))
        XCTAssertFalse(body.bodyPart(10, at: at(0.5)))
        XCTAssertTrue(body.bodyPart(10, at: at(1.0)))
        XCTAssertFalse(body.bodyPart(10, at: at(1.9)), "the interval starts again at the checkpoint")
        XCTAssertTrue(body.bodyPart(10, at: at(2.0)))
    }

    func testNoHeadWithinTheConnectTimeoutFails() {
        var body = machine(connect: 10)
        body.requestSent(at: at(0))
        XCTAssertNil(body.check(at: at(10)))
        XCTAssertEqual(body.check(at: at(10.5)), "no response within 10 s")
    }

    func testNoByteWithinTheStallTimeoutFailsOnceTheHeadCame() {
        var body = machine(connect: 10, stall: 30)
        body.requestSent(at: at(0))
        body.headReceived(writingAt: 0, limit: 0, at: at(5))
        XCTAssertNil(body.check(at: at(20)), "the connect timeout no longer applies")
        _ = body.bodyPart(100, at: at(30))
        XCTAssertNil(body.check(at: at(59)))
        XCTAssertEqual(body.check(at: at(60.5)), "no data for 30 s (stalled)")
    }

    func testAMetalinkDocumentsPartsAreSignsOfLifeWithoutASpeedCheck() {
        var body = machine(stall: 30, lowSpeed: 1_000_000, lowSpeedTime: 1)
        body.headReceived(writingAt: nil, limit: 0, at: at(0))
        for second in 1...40 {
            body.documentPart(at: at(Double(second)))
            XCTAssertNil(body.check(at: at(Double(second) + 0.1)), "a slow document is read to its end")
        }
    }

    func testTheMinimumSpeedIsCheckedOverEachWindow() {
        var body = machine(stall: 3600, lowSpeed: 100, lowSpeedTime: 10)
        body.headReceived(writingAt: 0, limit: 0, at: at(0))
        XCTAssertNil(body.check(at: at(0.25)), "the first look opens the window")
        _ = body.bodyPart(1500, at: at(5))
        XCTAssertNil(body.check(at: at(10.25)), "150 bytes/s over the window")
        _ = body.bodyPart(500, at: at(15))
        XCTAssertEqual(body.check(at: at(20.25)), "slower than 100 bytes/s for 10 s (50.0 bytes/s)")
    }

    /// An upload's request body is measured as a download's written body is, while it goes;
    /// once it went whole, the wait for the answer is only held to the stall timeout (a server
    /// may think a while before it answers).
    func testAnUploadsBodyIsMeasuredUntilItWentWhole() {
        var body = machine(stall: 30, lowSpeed: 100, lowSpeedTime: 10)
        body.sendingBody(limit: 0, at: at(0))
        XCTAssertNil(body.check(at: at(0.25)), "the first look opens the window")
        _ = body.bodyPart(500, at: at(5))
        XCTAssertEqual(body.check(at: at(10.25)), "slower than 100 bytes/s for 10 s (50.0 bytes/s)")

        var sent = machine(stall: 30, lowSpeed: 100, lowSpeedTime: 10)
        sent.sendingBody(limit: 0, at: at(0))
        XCTAssertNil(sent.check(at: at(0.25)))
        _ = sent.bodyPart(5000, at: at(2))
        sent.bodyWent(at: at(2))
        XCTAssertNil(sent.check(at: at(20)), "no speed to measure while the server thinks")
        XCTAssertNil(sent.check(at: at(31)))
        XCTAssertEqual(sent.check(at: at(32.5)), "no data for 30 s (stalled)")

        var limited = machine(stall: 3600, lowSpeed: 1000, lowSpeedTime: 10)
        limited.sendingBody(limit: 100, at: at(0))
        XCTAssertNil(limited.check(at: at(0)))
        _ = limited.bodyPart(600, at: at(9))
        XCTAssertNil(limited.check(at: at(10)), "a body held to its limit is no slow server")
    }

    func testABandwidthLimitBelowTheMinimumSpeedLowersItToHalfTheLimit() {
        var body = machine(stall: 3600, lowSpeed: 1000, lowSpeedTime: 10)
        body.headReceived(writingAt: 0, limit: 100, at: at(0))
        XCTAssertNil(body.check(at: at(0)))
        _ = body.bodyPart(600, at: at(9))
        XCTAssertNil(body.check(at: at(10)), "60 bytes/s is above half the limit of 100")
        _ = body.bodyPart(400, at: at(19))
        XCTAssertEqual(body.check(at: at(20)), "slower than 50 bytes/s for 10 s (40.0 bytes/s)")
    }

    func testAFloorFromOutsideRaisesTheMinimum() {
        var body = machine(stall: 3600, lowSpeed: 0, lowSpeedTime: 10)
        body.headReceived(writingAt: 0, limit: 0, at: at(0))
        XCTAssertNil(body.check(at: at(0)))
        _ = body.bodyPart(10_000, at: at(5))
        var measured: Double?
        let why = body.check(at: at(10)) { speed in
            measured = speed
            return 5000
        }
        XCTAssertEqual(measured, 1000)
        XCTAssertEqual(why, "slower than 5000 bytes/s for 10 s (1000.0 bytes/s)")
    }

    func testUnderItsLimitAPartWaitsUntilTheBytesFit() throws {
        var body = machine(stall: 1)
        body.headReceived(writingAt: 0, limit: 1000, at: at(0))
        XCTAssertNil(body.throttle(500, at: at(0.6)), "500 bytes in 0.6 s is under 1,000 a second")
        let until = try XCTUnwrap(body.throttle(1000, at: at(0.7)))
        XCTAssertEqual(until, at(1.5), "1,500 bytes fit by 1.5 s")
        // The wait goes in steps, and is no stall however long the stall timeout is.
        XCTAssertEqual(body.rateWaitStep(limit: 1000, at: at(0.7)), at(0.95))
        XCTAssertNil(body.check(at: at(1.9)), "the wait counts as activity")
        XCTAssertEqual(body.rateWaitStep(limit: 1000, at: at(1.4)), at(1.5))
        XCTAssertNil(body.rateWaitStep(limit: 1000, at: at(1.5)))
    }

    func testALimitLiftedWhileWaitingEndsTheWait() {
        var body = machine()
        body.headReceived(writingAt: 0, limit: 1, at: at(0))
        XCTAssertNotNil(body.throttle(3600, at: at(0)), "an hour's worth at 1 byte/s")
        XCTAssertNil(body.rateWaitStep(limit: 0, at: at(0.25)))
    }

    func testANewLimitOwesWhatTheOldOneDidNotAllowYet() throws {
        var body = machine()
        body.headReceived(writingAt: 0, limit: 1000, at: at(0))
        XCTAssertNotNil(body.throttle(3000, at: at(1)), "2,000 bytes beyond what 1 s allowed")
        body.limitChanged(to: 2000, at: at(1))
        // The 2,000 owed at 2,000 bytes/s: a second from the change.
        XCTAssertEqual(try XCTUnwrap(body.rateWaitStep(limit: 2000, at: at(1.9))), at(2.0))
        XCTAssertNil(body.rateWaitStep(limit: 2000, at: at(2.0)))
    }

    func testAWaitTooLongToCountIsAYear() throws {
        var body = machine()
        body.headReceived(writingAt: 0, limit: 1, at: at(0))
        let until = try XCTUnwrap(body.throttle(Int64.max / 2, at: at(0)))
        XCTAssertEqual(until, at(365 * 86400))
    }
}
