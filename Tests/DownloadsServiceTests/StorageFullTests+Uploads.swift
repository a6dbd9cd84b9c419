import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// An upload's `snapshot` on a state directory with little room: the copy is refused before a
/// byte is written (the others' tasks keep their room), and the same upload without a copy goes.
extension StorageFullTests {
    func testASnapshotThatWouldFillTheStateDirectoryIsRefused() async throws {
        http.set("/inbox", Route.receiving())
        let file = directory.file("big.bin")
        try Data(Self.content(1_000_000, seed: 97)).write(to: URL(fileURLWithPath: file))
        do {
            _ = try await call(
                "Upload", [.string(http.url("/inbox")), .string(file), .vardict(["snapshot": .boolean(true)])])
            XCTFail("a copy that leaves the 12 MiB state directory under 256 MiB free is refused")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.FileError", error.message)
            XCTAssertTrue(error.message.contains("no room for a copy"), error.message)
        }
        let copies = (try? FileManager.default.contentsOfDirectory(atPath: stateDirectory + "/uploads")) ?? []
        XCTAssertEqual(copies, [], "nothing was written")
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertEqual(listed, [.objectPaths([])], "no task was made")
        let reply = try await call("Upload", [.string(http.url("/inbox")), .string(file), .vardict([:])])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitState(task, ["finished"])
    }
}
