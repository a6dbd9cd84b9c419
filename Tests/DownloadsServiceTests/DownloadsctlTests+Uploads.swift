import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `downloadsctl upload`: the file reaches the server (as a PUT, or a form as curl's -F), the
/// reply is printed on standard output (or written to --reply), and list/status show the kind.
extension DownloadsctlTests {
    func testUploadSendsTheFilePrintsTheReplyAndListShowsIt() async throws {
        let content = Self.content(1_500_000, seed: 81)
        let file = directory.file("core.dump")
        try Data(content).write(to: URL(fileURLWithPath: file))
        http.set("/put", Route.receiving(status: 201, reply: "{\"id\": 7}\n"))
        let put = try await ctl(["upload", file, http.url("/put"), "-H", "X-Token: abc"])
        XCTAssertEqual(put.status, 0, put.description)
        XCTAssertEqual(put.stdout, "{\"id\": 7}\n", "the reply on standard output, as curl")
        XCTAssertTrue(
            put.stderr.contains("uploaded 1.4 MiB") && put.stderr.contains("the server answered 201"), put.stderr)
        let received = try XCTUnwrap(http.received("/put").first)
        XCTAssertEqual(received.method, "PUT")
        XCTAssertEqual(received.headers["x-token"], "abc")
        XCTAssertEqual(Self.sha256(received.body), Self.sha256(content))

        http.set("/form", Route.receiving(status: 200, reply: "thanks\n"))
        let replyFile = directory.file("reply.txt")
        let form = try await ctl([
            "upload", file, http.url("/form"), "-X", "POST", "--form", "attachment", "--field", "ticket=1234",
            "--reply", replyFile,
        ])
        XCTAssertEqual(form.status, 0, form.description)
        XCTAssertEqual(form.stdout, "", "the reply went to its file")
        XCTAssertEqual(try String(contentsOfFile: replyFile, encoding: .utf8), "thanks\n")
        let posted = try XCTUnwrap(http.received("/form").first)
        XCTAssertEqual(posted.method, "POST")
        XCTAssertTrue(posted.headers["content-type"]?.hasPrefix("multipart/form-data; boundary=") ?? false)
        let text = String(decoding: posted.body, as: UTF8.self)
        XCTAssertTrue(text.contains("name=\"ticket\"\r\n\r\n1234\r\n"), text.prefix(300).description)
        XCTAssertTrue(text.contains("name=\"attachment\"; filename=\"core.dump\""), text.prefix(300).description)

        let list = try await ctl(["list"])
        XCTAssertTrue(list.stdout.contains("↑ \(file) → \(http.url("/put"))"), list.stdout)
        let id = try XCTUnwrap(
            list.stdout.split(separator: "\n").dropFirst().first?.split(separator: " ").first.map(String.init))
        let status = try await ctl(["status", id])
        XCTAssertTrue(status.stdout.contains("kind:        upload"), status.stdout)
        XCTAssertTrue(status.stdout.contains("response:    201"), status.stdout)
        let json = try await ctl(["status", "--json", id])
        XCTAssertTrue(
            json.stdout.contains("\"kind\":\"upload\"") && json.stdout.contains("\"response_status\":201"), json.stdout)

        http.set(
            "/denied",
            {
                var route = Route.receiving(); route.requiredAuthorization = "secret"; return route
            }())
        let denied = try await ctl(["upload", file, http.url("/denied")])
        XCTAssertEqual(denied.status, 1, denied.description)
        XCTAssertTrue(denied.stderr.contains("upload failed: the server answered 401"), denied.stderr)
    }

    func testCtrlCPausesAnUploadAndResumeSendsItAgain() async throws {
        let content = Self.content(3_000_000, seed: 82)
        let file = directory.file("video.mp4")
        try Data(content).write(to: URL(fileURLWithPath: file))
        http.set("/videos", Route.receiving())
        let child = try ChildProcess([
            Self.ctl, "--address", bus.address, "upload", file, http.url("/videos"), "--limit-rate", "500K",
        ])
        try await interruptExpectingPause(child)
        let path = ObjectPath("/org/example/Downloads/tasks/1")
        let resumed = try await ctl(["resume", "1"])
        XCTAssertEqual(resumed.status, 0, resumed.description)
        try await waitState(path, ["finished"], seconds: 60)
        XCTAssertEqual(
            http.received("/videos").last.map { Self.sha256($0.body) }, Self.sha256(content),
            "sent again, whole, from byte 0")
    }

    func testUploadOverTheIETFProtocolShowsWhatTheServerConfirmed() async throws {
        let server = try ResumableUploadServer()
        defer { server.stop() }
        let content = Self.content(2_000_000, seed: 83)
        let file = directory.file("shard.bin")
        try Data(content).write(to: URL(fileURLWithPath: file))
        server.cut(atTotals: [1_000_000])
        let sent = try await ctl(["upload", file, server.url("/shards"), "--protocol", "ietf", "--ietf-version", "5"])
        XCTAssertEqual(sent.status, 0, sent.description)
        XCTAssertTrue(sent.stdout.contains(Self.sha256(content)), "the app's reply on standard output: \(sent.stdout)")
        XCTAssertEqual(server.bodyBytes, 2_000_000, "the cut cost nothing: every byte once")
        XCTAssertTrue(server.log.allSatisfy { $0.version == "5" })
        let status = try await ctl(["status", "1"])
        XCTAssertTrue(status.stdout.contains("confirmed:   1.9 MiB"), status.stdout)
        let json = try await ctl(["status", "1", "--json"])
        XCTAssertTrue(json.stdout.contains("\"bytes_confirmed\":2000000"), json.stdout)
        let refused = try await ctl(["upload", file, server.url("/shards"), "--protocol", "ftp"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("protocol must be one of plain, ietf, tus, auto"), refused.stderr)
    }
}
