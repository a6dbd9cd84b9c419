@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// The task states and the moves between them.
final class DownloadStateTests: XCTestCase {
    func testStateMachineTransitions() {
        let allowed: [DownloadState: Set<DownloadState>] = [
            .queued: [.running, .paused, .cancelled, .failed],
            .running: [.finished, .failed, .paused, .cancelled, .retrying, .queued],
            .retrying: [.running, .paused, .cancelled, .failed, .queued],
            .paused: [.queued, .cancelled],
            .failed: [.queued, .cancelled],
            .finished: [],
            .cancelled: [],
        ]
        for from in DownloadState.allCases {
            for to in DownloadState.allCases {
                XCTAssertEqual(from.canTransition(to: to), allowed[from]?.contains(to) ?? false, "\(from) → \(to)")
            }
        }
    }
}
