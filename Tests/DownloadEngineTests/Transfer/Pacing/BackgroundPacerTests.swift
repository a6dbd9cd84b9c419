@testable import DownloadModel
@testable import DownloadEngine
import XCTest

/// The background pacer's rule on its own: the delays and throughput a path would show, the
/// rates it answers.
final class BackgroundPacerTests: XCTestCase {
    let step = 0.25
    let link = 5_000_000.0

    /// Runs `steps` steps in which the path's delay is `delay(rate)` and what flows is the rate,
    /// at most the link; returns the pacer after them.
    func run(_ pacer: inout BackgroundPacer, from start: Double, steps: Int, delay: (Double) -> Double) -> Double {
        var now = start
        var flowing = min(pacer.rate, link)
        for _ in 0..<steps {
            _ = pacer.observe(delay: delay(flowing), throughput: flowing, now: now)
            flowing = min(pacer.rate, link)
            now += step
        }
        return now
    }

    func testAloneItRisesToTheLinkAndKeepsTheQueueNearTheTarget() {
        var pacer = BackgroundPacer()
        // An empty path answers in 1 ms; our own traffic past the link's rate builds a queue.
        let now = run(&pacer, from: 0, steps: 40) { rate in
            rate >= self.link ? 0.001 + 2 * BackgroundPacer.target : 0.001
        }
        XCTAssertGreaterThan(pacer.rate, 0.5 * link, "it rises to the link's rate")
        XCTAssertFalse(pacer.yielding)
        XCTAssertGreaterThan(now, 0)
    }

    func testAnotherFlowKeepingTheQueueFullMakesItGiveWayToTheFloorAndComeBack() {
        var pacer = BackgroundPacer()
        var now = run(&pacer, from: 0, steps: 30) { _ in 0.001 }
        let before = pacer.rate
        // Another flow keeps 40 ms in the queue whatever this one does.
        now = run(&pacer, from: now, steps: 12) { _ in 0.041 }
        XCTAssertEqual(
            pacer.rate, BackgroundPacer.floor, accuracy: 1, "it gives way down to the floor within three seconds")
        XCTAssertTrue(pacer.yielding, "and says so")
        XCTAssertLessThan(pacer.rate, before / 10)
        // The other flow ends: back to the link's rate within three seconds.
        _ = run(&pacer, from: now, steps: 12) { _ in 0.001 }
        XCTAssertGreaterThan(pacer.rate, 0.8 * link)
        XCTAssertFalse(pacer.yielding)
    }

    func testAFailedProbeCountsAsAFullQueueAndTheBaseIsTheMinimumOfTheLastMinute() {
        var pacer = BackgroundPacer()
        var now = run(&pacer, from: 0, steps: 20) { _ in 0.050 }  // a far path: 50 ms is its base
        XCTAssertGreaterThan(pacer.rate, 1_000_000, "a long path is not a full queue")
        now = run(&pacer, from: now, steps: 12) { _ in 1.0 }  // probes time out
        XCTAssertEqual(pacer.rate, BackgroundPacer.floor, accuracy: 1, "halved each step, down to the floor")
        // Seventy seconds on a path that became slower: learnt as its new base.
        _ = run(&pacer, from: now, steps: 280) { _ in 0.120 }
        XCTAssertGreaterThan(pacer.rate, 1_000_000, "a new route is learnt within a minute")
    }
}
