@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// The ranges of a segmented download: split, steal, cut.
final class SegmentTableTests: XCTestCase {
    func testSegmentTableSplitsStealsAndCutsAtEachEnd() throws {
        let coarse = SegmentTable(
            length: 1000, remaining: [ByteRange(start: 0, end: 1000)], pieces: 4, minimumSplit: 300)
        XCTAssertEqual(
            [coarse.claim()?.start, coarse.claim()?.start, coarse.claim()?.start], [0, 333, 666],
            "equal thirds, not four below the minimum")
        XCTAssertNil(coarse.claim(), "about 333 bytes left in each: not split below twice the minimum")
        let resumed = SegmentTable(
            length: 1000, remaining: [ByteRange(start: 100, end: 200), ByteRange(start: 400, end: 1000)], pieces: 3,
            minimumSplit: 100
        )
        XCTAssertEqual(resumed.held, 300)
        XCTAssertEqual(
            (0..<3).compactMap { _ in resumed.claim()?.start }, [100, 400, 700], "the largest range left is halved")

        let table = SegmentTable(
            length: 1000, remaining: [ByteRange(start: 0, end: 1000)], pieces: 4, minimumSplit: 100)
        XCTAssertEqual(table.remaining, [ByteRange(start: 0, end: 1000)], "adjacent ranges read as one")
        let first = try XCTUnwrap(table.claim(startingAt: 0))
        XCTAssertEqual([first.start, first.end], [0, 250])
        let claims = (0..<3).compactMap { _ in table.claim() }
        XCTAssertEqual(claims.map(\.start), [250, 500, 750])
        // A fifth connection steals the second half of the largest range (the lowest of equals).
        let fifth = try XCTUnwrap(table.claim())
        XCTAssertEqual([fifth.start, fifth.end], [125, 250])
        XCTAssertEqual(table.range(of: first.id), ByteRange(start: 0, end: 125))
        // Bytes past a range's end are not its own: cut and reported complete. (The writer is
        // never drained here: the table's bookkeeping is what is tested.)
        let writer = PartialFileWriter(
            path: "/nonexistent/never-written", fileAccess: DirectFileAccess(), queue: .init(label: "t"))
        let loop = EmbeddedEventLoop()
        let handed = table.write(
            first.id, ByteBuffer(bytes: [UInt8](repeating: 1, count: 300)), writer: writer, eventLoop: loop)
        XCTAssertEqual(handed.accepted, 125)
        XCTAssertTrue(handed.complete)
        XCTAssertEqual(table.held, 125)
        XCTAssertNil(table.range(of: first.id))
        _ = table.write(
            claims[0].id, ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)), writer: writer, eventLoop: loop)
        let stolen = try XCTUnwrap(table.claim())
        XCTAssertEqual([stolen.start, stolen.end], [625, 750])
        XCTAssertEqual(table.range(of: claims[1].id), ByteRange(start: 500, end: 625))
        XCTAssertEqual(table.remaining, [ByteRange(start: 125, end: 250), ByteRange(start: 260, end: 1000)])
        table.release(claims[2].id)
        XCTAssertEqual(table.claim()?.start, 750, "a released range waits for the next connection")
        XCTAssertFalse(table.isComplete)
        try? loop.syncShutdownGracefully()
    }
}
