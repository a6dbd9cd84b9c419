import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// A server that asks for a `Digest` login (RFC 7616): the app's user and password make a fresh
/// `Authorization` for every request (its method and URI, a counted `nc`), which the server
/// (`DigestLogin`, its own check) takes once each.
extension ChallengeTests {
    func testADigestLoginAnswersEveryRequestOfASegmentedDownloadAndAnUpload() async throws {
        let content = Self.content(4_000_000)
        let login = DigestLogin(user: "erin", password: "d1gest-Pa55", realm: "Archive")
        var route = Route(content: content)
        route.digest = login
        http.set("/archive.bin", route)
        let app = try await agent { _ in Self.use(["user": .string("erin"), "password": .string("d1gest-Pa55")]) }
        defer { app.connection.close() }
        let target = directory.file("archive.bin")
        let task = try await start(
            http.url("/archive.bin"), target, ["session": .string("app"), "connections": .uint32(4)])
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(app.questions.first?.details["scheme"]?.stringValue, "Digest")
        XCTAssertEqual(app.questions.first?.details["realm"]?.stringValue, "Archive")
        let statuses = http.requests(for: "/archive.bin").map(\.status)
        XCTAssertEqual(statuses.first, 401)
        XCTAssertFalse(
            statuses.dropFirst().contains(401), "a request after the answer refused: \(statuses) \(login.refused)")
        XCTAssertGreaterThan(statuses.count, 2, "several requests, each with its own nc: \(statuses)")
        // An upload to a SHA-256 Digest server: its PUT's method is in the digest.
        let source = directory.file("upload.bin")
        try Data(Self.content(200_000)).write(to: URL(fileURLWithPath: source))
        var put = Route.receiving(status: 201, reply: "{}")
        let shaLogin = DigestLogin(user: "erin", password: "d1gest-Pa55", realm: "Archive", algorithm: "SHA-256")
        put.digest = shaLogin
        http.set("/put.bin", put)
        let reply = try await call(
            "Upload",
            [
                .string(http.url("/put.bin")), .string(source),
                .vardict(["session": .string("app"), "method": .string("PUT"), "protocol": .string("plain")]),
            ])
        let upload = try XCTUnwrap(reply.first?.objectPathValue)
        try await assertFinished(upload)
        XCTAssertEqual(http.requests(for: "/put.bin").map(\.status), [401, 201], "\(shaLogin.refused)")
        XCTAssertEqual(Self.sha256(try XCTUnwrap(http.received("/put.bin").last).body), sha256(ofFile: source))
        try assertNoFileHolds("d1gest-Pa55")
    }

    func testAWrongDigestPasswordIsAskedAgain() async throws {
        let content = Self.content(100_000)
        var route = Route(content: content)
        route.digest = DigestLogin(user: "erin", password: "right", realm: "Archive")
        http.set("/again.bin", route)
        let app = try await agent { asked in
            let failures = asked.details["failures"]?.uint32Value ?? 0
            return Self.use(["user": .string("erin"), "password": .string(failures == 0 ? "wrong" : "right")])
        }
        defer { app.connection.close() }
        let target = directory.file("again.bin")
        let task = try await start(http.url("/again.bin"), target, ["session": .string("app")])
        try await assertFinished(task)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(app.questions.map { $0.details["failures"]?.uint32Value }, [0, 1])
    }
}
