import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A Flatpak app of user nobody against `downloadsd --system` (root, the shipped policy): its
/// directory descriptor travels to nobody's file helper (SCM_RIGHTS), which makes the file with
/// nobody's credentials below it; the sandbox's read-only mount holds there too.
final class SandboxedAppSystemBusTests: SystemBusTestCase {
    var app: FlatpakApp!

    override func setUp() async throws {
        try await super.setUp()
        chmod(directory.path, 0o755)
        app = try await FlatpakApp(
            id: "org.example.Player", busAddress: bus.address, busDirectory: bus.directory.path, systemBus: true,
            uid: 65534,
            directory: directory
        )
    }

    override func tearDown() async throws {
        app?.stop()
        try await super.tearDown()
    }

    func testAnAppOfAnotherUserWritesOnlyThroughItsDescriptorAsThatUser() async throws {
        let content = Self.content(400_000, seed: 11)
        http.set("/song.ogg", Route(content: content))
        let started = try await app.send([
            "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Downloads", "name": "song.ogg",
        ])
        let task = try ObjectPath(XCTUnwrap(started.value as? String, "\(started)"))
        try await until("the app's task finishes") {
            try await app.send(["op": "get", "path": task.rawValue, "prop": "State"]).value as? String == "finished"
        }
        let file = app.home + "/Downloads/song.ogg"
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(content))
        var info = stat()
        XCTAssertEqual(stat(file, &info), 0)
        XCTAssertEqual(info.st_uid, 65534, "made by nobody's file helper, not by root")
        // Root (the host, an administrator) sees the task with its app.
        let owner = try await property(task, "App")?.stringValue
        XCTAssertEqual(owner, "org.example.Player")

        let readOnly = try await app.send([
            "op": "startat", "url": http.url("/song.ogg"), "dir": app.home + "/Music", "name": "x",
        ])
        XCTAssertEqual(readOnly.error, "org.example.Downloads.Error.FileError", "\(readOnly)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/Music"), [])
        let byPath = try await app.send([
            "op": "start", "url": http.url("/song.ogg"), "dest": app.home + "/.bashrc",
            "options": ["overwrite": ["b", true]],
        ])
        XCTAssertEqual(byPath.error, "org.example.Downloads.Error.AccessDenied", "\(byPath)")
        XCTAssertEqual(try String(contentsOfFile: app.home + "/.bashrc", encoding: .utf8), "# the user's own\n")
    }

    /// `StartGroupAt` on the system bus: nobody's helper makes the subdirectories and the files
    /// beneath the descriptor, as nobody; a link on the way is refused there too.
    func testAGroupOfNestedNamesIsMadeByTheHelperAsTheAppsUser() async throws {
        let contents = (0..<2).map { Self.content(120_000, seed: UInt32(30 + $0)) }
        for (index, content) in contents.enumerated() { http.set("/tile\(index)", Route(content: content)) }
        let names = ["tiles/12/a.png", "tiles/12/b.png"]
        let reply = try await app.send([
            "op": "startgroupat", "dir": app.home + "/Downloads",
            "files": names.enumerated().map { [http.url("/tile\($0.offset)"), $0.element, [String: Any]()] as [Any] },
        ])
        let tasks = try XCTUnwrap((reply.value as? [Any])?.last as? [String], "\(reply)").map { try ObjectPath($0) }
        for task in tasks { _ = try await waitState(task, ["finished"]) }
        for (name, content) in zip(names, contents) {
            XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/" + name), Self.sha256(content))
        }
        for path in ["/Downloads/tiles", "/Downloads/tiles/12", "/Downloads/tiles/12/a.png"] {
            var info = stat()
            XCTAssertEqual(stat(app.home + path, &info), 0, path)
            XCTAssertEqual(info.st_uid, 65534, "\(path) made by nobody's file helper, not by root")
        }
        XCTAssertEqual(symlink("/etc", app.home + "/Downloads/etc"), 0)
        let linked = try await app.send([
            "op": "startgroupat", "dir": app.home + "/Downloads",
            "files": [[http.url("/tile0"), "etc/cron.d/x", [String: Any]()]],
        ])
        XCTAssertEqual(linked.error, "org.example.Downloads.Error.FileError", "\(linked)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/cron.d/x"))
    }

    /// kill -9 mid-download: the restarted daemon reopens the partial file nobody's helper made
    /// below the descriptor, by its recorded path and inode, and finishes.
    func testKilledMidDownloadTheTaskFinishesThroughTheHelper() async throws {
        let content = Self.content(3_000_000, seed: 12)
        var route = Route(content: content)
        route.bytesPerSecond = 500_000
        http.set("/slow", route)
        let started = try await app.send([
            "op": "startat", "url": http.url("/slow"), "dir": app.home + "/Downloads", "name": "big.bin",
        ])
        let task = try ObjectPath(XCTUnwrap(started.value as? String, "\(started)"))
        try await waitBytes(task, atLeast: 1_200_000)
        killDaemon()
        try await startDaemon()
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: app.home + "/Downloads/big.bin"), Self.sha256(content))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: app.home + "/Downloads"), ["big.bin"])
        let state = try await app.send(["op": "get", "path": task.rawValue, "prop": "State"])
        XCTAssertEqual(state.value as? String, "finished", "still the app's own after the restart: \(state)")
    }
}
