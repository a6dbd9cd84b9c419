import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The completion call counts uploads with downloads: a session of both is done when the last
/// of either ends.
extension CompletionHandlerTests {
    func testASessionOfDownloadsAndUploadsIsCalledOnceTheUploadEnds() async throws {
        let app = try await makeApp()
        defer { app.connection.close() }
        try await app.register("sync") { try await self.call($0, $1) }
        http.set("/fast", Route(content: Self.content(1000)))
        http.set("/inbox", Route.receiving())
        let file = directory.file("outgoing.bin")
        try Data(Self.content(1_500_000, seed: 95)).write(to: URL(fileURLWithPath: file))
        let reply = try await call(
            "Upload",
            [
                .string(http.url("/inbox")), .string(file),
                .vardict(["session": .string("sync"), "max_bytes_per_second": .uint64(1_000_000)]),
            ])
        let upload = try XCTUnwrap(reply.first?.objectPathValue)
        let download = try await start(http.url("/fast"), directory.file("incoming"), ["session": .string("sync")])
        try await waitState(download, ["finished"])
        let running = try await property(upload, "State")
        XCTAssertEqual(running?.stringValue, "running", "the upload takes about 1.5 s at its limit")
        XCTAssertEqual(app.calls.withLockedValue { $0 }, [], "the upload of the session is still running")
        try await waitState(upload, ["finished"])
        try await waitFor { app.calls.withLockedValue { $0.count } >= 1 }
        XCTAssertEqual(app.calls.withLockedValue { $0 }, ["sync"])
    }
}
