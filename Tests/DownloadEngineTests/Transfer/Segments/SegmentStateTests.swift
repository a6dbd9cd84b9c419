@testable import DownloadEngine
@testable import DownloadModel
import XCTest

/// The segment phase changes through `SegmentState.move(to:)` alone, which refuses the steps a
/// run can never take and keeps the phase.
final class SegmentStateTests: XCTestCase {
    func split() -> SegmentPhase {
        let table = SegmentTable(
            length: 4096, remaining: [ByteRange(start: 0, end: 4096)], pieces: 2, minimumSplit: 1024)
        return .split(.init(table: table, firstClaim: nil, workers: nil, validatorSource: nil))
    }

    func name(_ phase: SegmentPhase) -> String {
        switch phase {
        case .unsplit: "unsplit"
        case .probing: "probing"
        case .split: "split"
        case .settled: "settled"
        }
    }

    func testARunProbesSplitsLetsGoAndSettles() {
        var state = SegmentState(connections: 4)
        XCTAssertTrue(state.move(to: .probing(.init())))
        XCTAssertTrue(state.move(to: .probing(.init(validatorSource: "http://mirror", source: 1))), "the next mirror")
        XCTAssertTrue(state.move(to: split()))
        XCTAssertNotNil(state.table)
        state.attemptEnded()
        XCTAssertNotNil(state.table, "the ranges stay for the checkpoints")
        XCTAssertTrue(state.move(to: split()), "the next attempt resumes the recorded ranges")
        state.letGoOfRanges()
        XCTAssertEqual(name(state.phase), "unsplit")
        XCTAssertTrue(state.move(to: .settled))
        XCTAssertTrue(state.settled)
    }

    func testNothingLeavesSettledAndOnlyASplitIsLetGo() {
        var state = SegmentState(connections: 4)
        XCTAssertTrue(state.move(to: .settled))
        for next in [SegmentPhase.unsplit, .probing(.init()), split()] {
            XCTAssertFalse(state.move(to: next), "settled → \(name(next)) is refused")
            XCTAssertEqual(name(state.phase), "settled", "and the phase stays")
        }
        var probing = SegmentState(connections: 2)
        probing.move(to: .probing(.init()))
        XCTAssertFalse(probing.move(to: .unsplit), "a probe has no ranges to let go")
        probing.letGoOfRanges()
        XCTAssertEqual(name(probing.phase), "probing")
    }

    /// Defence in depth for the mirrored pause-and-kill hole: a run that split never probes
    /// again (a probe would take its ranges, and a stop's checkpoint would then record the bytes
    /// of every range as one prefix); its table stays for the checkpoint.
    func testASplitNeverGoesBackToProbing() {
        var state = SegmentState(connections: 4)
        state.move(to: .probing(.init()))
        state.move(to: split())
        XCTAssertFalse(state.move(to: .probing(.init(validatorSource: "http://mirror", source: 1))))
        XCTAssertEqual(name(state.phase), "split")
        XCTAssertNotNil(state.table, "the ranges stay for the stop's checkpoint")
        state.letGoOfRanges()
        XCTAssertTrue(state.move(to: .probing(.init())), "after a new version's let-go, a probe again")
    }
}
