import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A Flatpak app uploads a file it opened (`UploadAt`); a path is refused (the service would read
/// what the sandbox hides), and so is a reply destination; the reply is the app's to read, and
/// no other app's.
extension SandboxedAppTests {
    func testUploadAtSendsTheFileTheAppOpenedAndAPathIsRefused() async throws {
        let app = try await launch("org.example.Player")
        let snoop = try await launch("org.example.Snoop")
        let content = Self.content(800_000, seed: 93)
        let file = app.home + "/Downloads/song.ogg"
        try Data(content).write(to: URL(fileURLWithPath: file))
        http.set("/share", Route.receiving(status: 201, reply: "shared\n"))

        let refused = try await app.send(["op": "upload", "url": http.url("/share"), "source": file])
        XCTAssertEqual(refused.error, "org.example.Downloads.Error.AccessDenied", "\(refused)")
        XCTAssertTrue(refused.message?.contains("UploadAt") == true, "the message says what to do instead: \(refused)")
        let replyPath = try await app.send([
            "op": "uploadat", "url": http.url("/share"), "file": file,
            "options": ["reply_destination": ["s", app.home + "/.bashrc"]],
        ])
        XCTAssertEqual(replyPath.error, "org.example.Downloads.Error.AccessDenied", "\(replyPath)")
        XCTAssertEqual(try String(contentsOfFile: app.home + "/.bashrc", encoding: .utf8), "# the user's own\n")

        let task = try path(await app.send(["op": "uploadat", "url": http.url("/share"), "file": file]))
        try await waitState(task, ["finished"])
        XCTAssertEqual(
            http.received("/share").map { Self.sha256($0.body) }, [Self.sha256(content)],
            "only the accepted upload reached the server")
        let reply = try await app.send([
            "op": "call", "path": task.rawValue, "iface": "org.example.Downloads.Task", "method": "GetReply",
        ])
        XCTAssertNil(reply.error, "\(reply)")
        let answer = try XCTUnwrap(reply.value as? [Any], "\(reply)")
        XCTAssertEqual(answer.first as? Int, 201)
        XCTAssertEqual(
            (answer.last as? String).flatMap { Data(base64Encoded: $0) }.map { String(decoding: $0, as: UTF8.self) },
            "shared\n")
        let kind = try await app.send(["op": "get", "path": task.rawValue, "prop": "Kind"])
        XCTAssertEqual(kind.value as? String, "upload")
        let other = try await snoop.send([
            "op": "call", "path": task.rawValue, "iface": "org.example.Downloads.Task", "method": "GetReply",
        ])
        XCTAssertTrue(
            ["org.example.Downloads.Error.NotFound", "org.freedesktop.DBus.Error.UnknownObject"].contains(
                other.error ?? ""),
            "another app's upload does not exist for it: \(other)")
    }

    /// A file larger than one whole body goes as `sendfile` regions from the descriptor the app
    /// handed over: the bytes are the file's.
    func testALargeFileTheAppOpenedGoesByteForByte() async throws {
        let app = try await launch("org.example.Player")
        let content = Self.content(3_000_000, seed: 96)
        let file = app.home + "/Downloads/album.flac"
        try Data(content).write(to: URL(fileURLWithPath: file))
        http.set("/large", Route.receiving(status: 201))
        let task = try path(await app.send(["op": "uploadat", "url": http.url("/large"), "file": file]))
        try await waitState(task, ["finished"])
        XCTAssertEqual(http.received("/large").map { Self.sha256($0.body) }, [Self.sha256(content)])
    }
}
