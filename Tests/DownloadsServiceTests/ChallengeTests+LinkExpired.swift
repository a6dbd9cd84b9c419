import DBus
import DownloadsAPI
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A signed link that expires mid-download (`link-expired`): the app gives a fresh one and the
/// task goes on from its bytes there, as `SetURL` would.
extension ChallengeTests {
    func testAnExpiredLinkIsRenewedByTheAppAndTheDownloadGoesOnFromItsBytes() async throws {
        let content = Self.content(3_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        route.closeAfter = 1_500_000
        route.misbehaveTimes = 1
        http.set("/signed-1", route)
        http.set("/signed-2", Route(content: content))
        let fresh = http.url("/signed-2")
        let app = try await agent(options: ["challenges": .strings(["link-expired"])]) { _ in
            Self.use(["url": .string(fresh)])
        }
        defer { app.connection.close() }
        let target = directory.file("signed.bin")
        let task = try await start(http.url("/signed-1"), target, ["session": .string("app")])
        try await until("a megabyte arrived by the first link", seconds: 30) {
            (try await self.property(task, "BytesWritten")?.int64Value ?? 0) >= 1_000_000
        }
        // The link expires: the server refuses it from now on.
        http.update("/signed-1") { $0.failFirst = (100, 403, nil) }
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let asked = try XCTUnwrap(app.questions.first)
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(asked.kind, "link-expired")
        XCTAssertEqual(asked.details["url"]?.stringValue, http.url("/signed-1"))
        XCTAssertEqual(asked.details["status"]?.uint32Value, 403)
        let url = try await property(task, "URL")?.stringValue
        XCTAssertEqual(url, fresh, "the task's URL is the app's new link")
        // It went on from its bytes at the new link.
        XCTAssertEqual(http.requests(for: "/signed-2").map(\.status), [206])
    }

    func testALinkAnswerThatStartWouldRefuseFailsTheTaskAsWithoutAnApp() async throws {
        var gone = Route(content: Self.content(1000))
        gone.failFirst = (100, 410, nil)
        http.set("/gone", gone)
        let app = try await agent(options: ["challenges": .strings(["link-expired"])]) { _ in
            Self.use(["url": .string("ftp://127.0.0.1/file")])
        }
        defer { app.connection.close() }
        let task = try await start(http.url("/gone"), directory.file("gone.bin"), ["session": .string("app")])
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(app.questions.count, 1)
        let url = try await property(task, "URL")?.stringValue
        XCTAssertEqual(url, http.url("/gone"))
    }
}
