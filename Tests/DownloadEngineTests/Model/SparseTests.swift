@testable import DownloadModel
import FileIdentities
import XCTest

/// What a run learns sits behind one reference (`Sparse`, `RunDetails`): a task that never ran
/// holds none, a nil set makes none, copies share the box until one of them changes, and two
/// records are equal by their values, not by their boxes.
final class SparseTests: XCTestCase {
    func testAQueuedRecordHoldsNoBoxAndANilSetMakesNone() {
        var queued = DownloadTaskRecord.plain(1)
        XCTAssertFalse(queued.$details.isBoxed)
        queued.errorName = nil
        queued.validator = nil
        queued.metrics = nil
        queued.segments = nil
        XCTAssertFalse(queued.$details.isBoxed, "setting nil on a record without details makes none")
        XCTAssertEqual(queued, DownloadTaskRecord.plain(1))
        queued.enter(.cancelled)
        XCTAssertFalse(queued.$details.isBoxed, "a task cancelled before it ran learned nothing")
    }

    func testARunsFieldsReadBackAndCopiesAreIndependent() {
        var running = DownloadTaskRecord.plain(2)
        running.enter(.running)
        XCTAssertTrue(running.$details.isBoxed, "a run's metrics are its first detail")
        running.validator = "\"v1\""
        running.finalURL = "http://127.0.0.1/final"
        running.partialFile = FileIdentity(device: 7, inode: 9)
        running.segments = [ByteRange(start: 0, end: 10)]
        running.resolvedPath = "/tmp/2"
        let snapshot = running
        running.validator = "\"v2\""
        running.segments?.append(ByteRange(start: 20, end: 30))
        running.errorName = "org.example.Downloads.Error.Network"
        running.errorMessage = "reset"
        XCTAssertEqual(snapshot.validator, "\"v1\"", "a copy taken before keeps what it had")
        XCTAssertEqual(snapshot.segments, [ByteRange(start: 0, end: 10)])
        XCTAssertNil(snapshot.errorName)
        XCTAssertEqual(running.validator, "\"v2\"")
        XCTAssertEqual(running.segments, [ByteRange(start: 0, end: 10), ByteRange(start: 20, end: 30)])
        XCTAssertEqual(running.errorMessage, "reset")
        XCTAssertEqual(running.finalURL, "http://127.0.0.1/final")
        XCTAssertEqual(running.partialFile, FileIdentity(device: 7, inode: 9))
        XCTAssertEqual(running.resolvedPath, "/tmp/2")
        XCTAssertNotEqual(snapshot, running)
        running.enter(.finished)
        XCTAssertNotNil(running.metrics?.endedAt)
        XCTAssertNil(snapshot.metrics?.endedAt, "the copy's metrics are its own")
    }

    func testEqualDetailsInTwoBoxesAreEqualAndHashAlike() {
        var a = DownloadTaskRecord.plain(3)
        var b = DownloadTaskRecord.plain(3)
        a.validator = "\"v\""
        b.validator = "\"v\""
        XCTAssertEqual(a, b)
        XCTAssertEqual(a.hashValue, b.hashValue)
        var emptied = DownloadTaskRecord.plain(3)
        emptied.validator = "\"v\""
        emptied.validator = nil
        XCTAssertTrue(emptied.$details.isBoxed)
        XCTAssertEqual(emptied, DownloadTaskRecord.plain(3), "an emptied box equals no box")
        XCTAssertEqual(emptied.hashValue, DownloadTaskRecord.plain(3).hashValue)
    }
}
