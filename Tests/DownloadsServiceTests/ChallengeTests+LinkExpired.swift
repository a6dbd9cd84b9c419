import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
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

extension ChallengeTests {
    /// The fourth trust round's fourth finding: two tasks of one session on one server meet 403
    /// at once. Each is asked about its own link, and each answer's URL is its task's alone
    /// (before, one question was asked and its URL set on both: the second file became the
    /// first's bytes).
    func testTwoExpiredLinksOfOneSessionAreAskedEachAndRenewedEach() async throws {
        let contents = (0..<2).map { Self.content(200_000, seed: UInt32(90 + $0)) }
        for (index, content) in contents.enumerated() {
            var old = Route(content: content)
            old.failFirst = (100, 403, nil)
            http.set("/old\(index)", old)
            http.set("/fresh\(index)", Route(content: content))
        }
        let release = NIOLockedValueBox(false)
        let app = try await agent(options: ["challenges": .strings(["link-expired"])]) { asked in
            // Both questions wait until both tasks wait, so they are out at the same time.
            while !release.withLockedValue({ $0 }) { try? await Task.sleep(for: .milliseconds(20)) }
            let url = asked.details["url"]?.stringValue ?? ""
            return Self.use(["url": .string(url.replacingOccurrences(of: "/old", with: "/fresh"))])
        }
        defer { app.connection.close() }
        var tasks: [ObjectPath] = []
        for index in contents.indices {
            tasks.append(
                try await start(http.url("/old\(index)"), directory.file("link\(index)"), ["session": .string("app")]))
        }
        for task in tasks {
            try await until("both tasks wait for their app") {
                try await self.property(task, "WaitingFor")?.stringValue == "app"
            }
        }
        release.withLockedValue { $0 = true }
        for (index, task) in tasks.enumerated() {
            try await assertFinished(task)
            XCTAssertEqual(
                sha256(ofFile: directory.file("link\(index)")), Self.sha256(contents[index]), "file \(index)")
            let url = try await property(task, "URL")?.stringValue
            XCTAssertEqual(url, http.url("/fresh\(index)"))
        }
        XCTAssertEqual(
            Set(app.questions.compactMap { $0.details["url"]?.stringValue }),
            Set(contents.indices.map { http.url("/old\($0)") }), "each task asked about its own link")
    }

    /// The fourth trust round's sixth finding: a server that names another realm on every 401.
    /// Every question of the run counts toward the task's limit, with a pause between answers:
    /// three questions and the task fails (before, 3,288 questions and requests in 20 s).
    func testARealmThatChangesOnEvery401IsAskedThreeTimesAndFails() async throws {
        var route = Route(content: Self.content(1000))
        route.requiredAuthorization = "Basic " + Data("ann:right".utf8).base64EncodedString()
        route.authenticate = "Basic realm=\"realm {n}\""
        http.set("/shifty", route)
        let app = try await agent { _ in Self.use(["user": .string("ann"), "password": .string("wrong")]) }
        defer { app.connection.close() }
        let task = try await start(http.url("/shifty"), directory.file("shifty"), ["session": .string("app")])
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(app.questions.map { $0.details["failures"]?.uint32Value }, [0, 1, 2])
        XCTAssertEqual(Set(app.questions.compactMap { $0.details["realm"]?.stringValue }).count, 3)
        XCTAssertEqual(http.requests(for: "/shifty").map(\.status), [401, 401, 401, 401])
    }
}
