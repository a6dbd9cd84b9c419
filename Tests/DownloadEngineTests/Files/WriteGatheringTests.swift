@testable import DownloadEngine
import Dispatch
import XCTest

/// How much a partial file's writer gathers before it wakes its queue: the most while few files
/// are written, what every writer gathered before once many are.
final class WriteGatheringTests: XCTestCase {
    func testOneStreamGathersUpToItsCeilingAndManyGatherTheFloor() {
        let ceiling = 2 << 20
        XCTAssertEqual(WriteGathering.bytes(ceiling: ceiling, writers: 1), ceiling)
        XCTAssertEqual(WriteGathering.bytes(ceiling: ceiling, writers: 8), ceiling)
        XCTAssertEqual(WriteGathering.bytes(ceiling: ceiling, writers: 16), 1 << 20)
        XCTAssertEqual(WriteGathering.bytes(ceiling: ceiling, writers: 32), WriteGathering.floor)
        XCTAssertEqual(WriteGathering.bytes(ceiling: ceiling, writers: 10_000), WriteGathering.floor)
        // Never more than the writer's ceiling, even at the floor (a small high-water mark).
        XCTAssertEqual(WriteGathering.bytes(ceiling: 64 << 10, writers: 10_000), 64 << 10)
        XCTAssertEqual(WriteGathering.bytes(ceiling: 64 << 10, writers: 1), 64 << 10)
    }

    /// The budget is shared by the writers alive: with a hundred more made, each gathers the
    /// floor, so a hundred transfers hold no more than they did before.
    func testWritersAliveShareTheBudget() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gathering-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var writers: [PartialFileWriter] = []
        for i in 0..<100 {
            writers.append(
                PartialFileWriter(
                    path: directory.appendingPathComponent("\(i).part").path, fileAccess: DirectFileAccess(),
                    queue: DispatchQueue(label: "gathering-\(i)")))
        }
        XCTAssertEqual(WriteGathering.bytes(ceiling: 2 << 20), WriteGathering.floor)
        XCTAssertEqual(writers.count, 100)
    }
}
