import DBus
import Foundation
import DownloadsAPI
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// The rule for sending a request again (docs/behaviour.md), against Python's `http.server`
/// speaking HTTP/1.0 (it answers and closes): a complete final head is the outcome whatever the
/// connection does next; a POST sent whole whose answer was lost fails `OutcomeUnknown` and is not
/// sent again, unless the app gave an `Idempotency-Key`; a PUT is sent again; `Resume` is the
/// app's own decision to send it again.
final class SendingAgainTests: DaemonTestCase {
    var server: HTTP10Server!

    override func setUp() async throws {
        try await super.setUp()
        server = try HTTP10Server(in: directory.path)
    }

    override func tearDown() async throws {
        server?.stop()
        try await super.tearDown()
    }

    func upload(_ url: String, _ source: String, _ options: [String: DBusValue]) async throws -> ObjectPath {
        let reply = try await call("Upload", [.string(url), .string(source), .vardict(options)])
        return try XCTUnwrap(reply.first?.objectPathValue)
    }

    func taskCall(_ task: ObjectPath, _ method: String) async throws {
        _ = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: method)
    }

    func makeFile(_ name: String, size: Int) throws -> String {
        let path = directory.file(name)
        try Data(Self.content(size, seed: 5)).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The case: 40 POSTs to a server that answers 201 at once and closes. Each reaches
    /// the server exactly once; each task ends finished (the 201 is its outcome) or, where the
    /// answer was lost with the body sent whole, OutcomeUnknown: never sent twice.
    func testAPostToAServerThatAnswersAndClosesIsSentOnce() async throws {
        let small = try makeFile("form.bin", size: 2_000)
        let large = try makeFile("photo.jpg", size: 600_000)
        var tasks: [(ObjectPath, String)] = []
        for index in 0..<40 {
            let path = "/answer-and-close/\(index)"
            tasks.append(
                (
                    try await upload(
                        server.url(path), index % 2 == 0 ? small : large,
                        [
                            "method": .string("POST"), "protocol": .string("plain"),
                        ]), path
                ))
        }
        var ends: [String: Int] = [:]
        for (task, path) in tasks {
            let state = try await waitState(task, ["finished", "failed"])
            let error = try await property(task, "Error")?.stringValue ?? ""
            ends[state + (error.isEmpty ? "" : " " + error), default: 0] += 1
            if state == "failed" { XCTAssertEqual(error, "org.example.Downloads.Error.OutcomeUnknown", path) }
            XCTAssertEqual(server.requests(to: path).count, 1, "\(path) reached the server once (\(state) \(error))")
        }
        XCTAssertEqual(server.log.count, 40, "40 uploads, 40 POSTs; ends: \(ends)")
        XCTAssertGreaterThan(ends["finished", default: 0], 0, "a 201 that came is the outcome: \(ends)")
    }

    /// An HTTP/1.0 server that reads the body, answers 201 with no length and closes: finished
    /// once, with its reply.
    func testAnAnswerEndedByClosingIsTheOutcome() async throws {
        let file = try makeFile("report.bin", size: 300_000)
        let task = try await upload(
            server.url("/read-then-answer/r"), file, ["method": .string("POST"), "protocol": .string("plain")])
        try await waitState(task, ["finished"])
        XCTAssertEqual(server.requests(to: "/read-then-answer/r").map(\.read), [300_000])
        let reply = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task",
            method: "GetReply"
        )
        XCTAssertEqual(reply[0].uint32Value, 201)
        XCTAssertEqual(String(decoding: reply[2].bytesValue ?? [], as: UTF8.self), "{\"stored\": true}\n")
    }

    /// An early answer: 413 before the server read the body, the connection then closed (HTTP/1.0)
    /// or kept open with the body unread (HTTP/1.1, the answer's length given, chunked or empty). The
    /// answer is the outcome at once, not after the stall timeout (60 s): HTTPError with its
    /// body for GetReply, sent once.
    func testAnEarlyRefusalIsTheOutcomeAtOnce() async throws {
        let big = try makeFile("video.bin", size: 24_000_000)
        let open = try HTTP10Server(in: directory.path, keepAlive: true)
        defer { open.stop() }
        let reason = "{\"error\": \"too large\"}\n"
        for (server, path, body) in [
            (server!, "/refuse-early/a", reason), (server!, "/refuse-early-empty/b", ""),
            (open, "/refuse-early/c", reason),
            (open, "/refuse-early-chunked/d", reason), (open, "/refuse-early-empty/e", ""),
        ] {
            let task = try await upload(
                server.url(path), big, ["method": .string("POST"), "protocol": .string("plain")])
            // Well inside the stall timeout: the answer is heard, not waited out.
            try await waitState(task, ["failed"], seconds: 30)
            let error = try await property(task, "Error")?.stringValue
            XCTAssertEqual(error, "org.example.Downloads.Error.HTTPError", path)
            let reply = try await client.call(
                destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task",
                method: "GetReply"
            )
            XCTAssertEqual(reply[0].uint32Value, 413, path)
            XCTAssertEqual(String(decoding: reply[2].bytesValue ?? [], as: UTF8.self), body, path)
            XCTAssertEqual(server.requests(to: path).count, 1, "\(path): not sent again")
        }
    }

    /// A request that arrived whole and whose answer was lost: a POST fails OutcomeUnknown (sent
    /// once) and `Resume` sends it again; a POST with an Idempotency-Key and a PUT are sent again
    /// by the service itself.
    func testALostAnswerFailsAPostButNotAPutOrAKeyedPost() async throws {
        let file = try makeFile("payment.json", size: 50_000)
        let post = try await upload(
            server.url("/swallow-once/post"), file, ["method": .string("POST"), "protocol": .string("plain")])
        try await waitState(post, ["failed"])
        let error = try await property(post, "Error")?.stringValue
        XCTAssertEqual(error, "org.example.Downloads.Error.OutcomeUnknown")
        let message = try await property(post, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(message.contains("not sent again"), message)
        XCTAssertEqual(server.requests(to: "/swallow-once/post").count, 1, "never sent again on its own")
        try await until("a Failed signal with OutcomeUnknown") {
            signals.withLockedValue { $0 }.contains {
                $0.0 == "Failed" && $0.1.first?.objectPathValue == post
                    && $0.1.dropFirst().first?.stringValue == "org.example.Downloads.Error.OutcomeUnknown"
            }
        }
        // The app knows better (it checked with the server): Resume sends it again.
        try await taskCall(post, "Resume")
        try await waitState(post, ["finished"])
        XCTAssertEqual(server.requests(to: "/swallow-once/post").count, 2)

        let keyed = try await upload(
            server.url("/swallow-once/keyed"), file,
            [
                "method": .string("POST"), "protocol": .string("plain"),
                "headers": .stringDict(["Idempotency-Key": "8e03978e-40d5-43e8-bc93-6894a57f9324"]),
            ])
        try await waitState(keyed, ["finished"])
        XCTAssertEqual(
            server.requests(to: "/swallow-once/keyed").map(\.key),
            [
                "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324",
            ], "sent again with the same key")

        let put = try await upload(
            server.url("/swallow-once/put"), file, ["method": .string("PUT"), "protocol": .string("plain")])
        try await waitState(put, ["finished"])
        XCTAssertEqual(server.requests(to: "/swallow-once/put").map(\.method), ["PUT", "PUT"], "PUT is idempotent")
    }

    /// The daemon killed after a POST went out whole and before its answer: the restart does not
    /// send it again (OutcomeUnknown, the server has it once); `Resume` does. A PUT killed the
    /// same way is sent again by the restart, as before.
    func testAKillAfterAPostWentWholeDoesNotSendItAgain() async throws {
        let file = try makeFile("order.json", size: 200_000)
        var slow = Route.receiving()
        slow.replyDelay = 30
        http.set("/orders", slow)
        http.set("/files", slow)
        let post = try await upload(
            http.url("/orders"), file, ["method": .string("POST"), "protocol": .string("plain")])
        let put = try await upload(http.url("/files"), file, ["method": .string("PUT"), "protocol": .string("plain")])
        try await until("both bodies arrived whole") {
            self.http.received("/orders").first?.complete == true
                && self.http.received("/files").first?.complete == true
        }
        // The mark is a checkpoint: give it the moment a save takes before the kill.
        try await until("the POST is recorded as sent whole") {
            let upload = try await DatabaseQueue(path: self.stateDirectory + "/downloads.sqlite").read { db in
                try String.fetchOne(
                    db, sql: "SELECT upload FROM task WHERE id = ?", arguments: [Int64(DownloadsAPI.taskID(post) ?? 0)])
            }
            return upload?.contains("\"sent_whole\":true") == true
        }
        killDaemon()
        http.set("/orders", Route.receiving())
        http.set("/files", Route.receiving())
        try await startDaemon()
        try await waitState(post, ["failed"])
        let error = try await property(post, "Error")?.stringValue
        XCTAssertEqual(error, "org.example.Downloads.Error.OutcomeUnknown")
        XCTAssertEqual(http.received("/orders").count, 1, "not sent again by the restart")
        try await waitState(put, ["finished"])
        XCTAssertEqual(http.received("/files").count, 2, "a PUT is sent again")
        try await taskCall(post, "Resume")
        try await waitState(post, ["finished"])
        XCTAssertEqual(http.received("/orders").count, 2, "Resume is the app's decision to send it again")
    }
}
