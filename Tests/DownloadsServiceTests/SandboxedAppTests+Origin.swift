import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A sandboxed app's files, made through the descriptors it handed over (`StartAt`), say where
/// they came from like any other: through a directory descriptor (on the partial file before
/// its rename) and on the app's own file written in place; and an app that opts out leaves none.
extension SandboxedAppTests {
    func testFilesMadeThroughAnAppsDescriptorsSayWhereTheyCameFrom() async throws {
        let app = try await launch("org.example.Player")
        _ = try await call("ListTasks", [.string("")])
        let content = Self.content(150_000, seed: 64)
        http.set("/song.ogg", Route(content: content))
        let intoDirectory = try path(
            await app.send([
                "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "song.ogg",
                "options": ["referrer": ["s", "http://127.0.0.1/album"]],
            ]))
        let inPlace = try path(
            await app.send([
                "op": "startfile", "url": http.url("/song.ogg"), "file": app.home + "/Downloads/own.ogg",
            ]))
        let optedOut = try path(
            await app.send([
                "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "quiet.ogg",
                "options": ["origin_attributes": ["b", false]],
            ]))
        for task in [intoDirectory, inPlace, optedOut] { try await waitState(task, ["finished"]) }
        for name in ["song.ogg", "own.ogg", "quiet.ogg"] {
            XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/" + name), Self.sha256(content), name)
        }
        func origin(_ name: String, _ attribute: String = "user.xdg.origin.url") async throws -> String? {
            let read = try await run([
                "getfattr", "--absolute-names", "--only-values", "-n", attribute, app.home + "/Downloads/" + name,
            ])
            return read.status == 0 ? read.stdout : nil
        }
        let song = try await origin("song.ogg")
        let page = try await origin("song.ogg", "user.xdg.referrer.url")
        let own = try await origin("own.ogg")
        let ownPage = try await origin("own.ogg", "user.xdg.referrer.url")
        let quiet = try await origin("quiet.ogg")
        XCTAssertEqual(song, http.url("/song.ogg"))
        XCTAssertEqual(page, "http://127.0.0.1/album")
        XCTAssertEqual(own, http.url("/song.ogg"), "the app's own file, written in place")
        XCTAssertNil(ownPage)
        XCTAssertNil(quiet, "origin_attributes false")
        // The host user's Recent is not the app's: add_to_recent is refused, and nothing starts.
        let recent = try await app.send([
            "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "recent.ogg",
            "options": ["add_to_recent": ["b", true]],
        ])
        XCTAssertEqual(recent.error, "org.example.Downloads.Error.AccessDenied", "\(recent)")
        XCTAssertTrue(recent.message?.contains("a sandboxed app's Recent is its own") == true, "\(recent)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: app.home + "/Downloads/recent.ogg"))
    }
}
