import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Where people look after `downloadsctl get`: the file in the file chooser's Recent (the user's
/// `recently-used.xbel`, read back with GLib's own `GBookmarkFile`), written by the per-user
/// daemon as the user; and `downloadsctl show`, which asks the desktop's file manager
/// (`org.freedesktop.FileManager1`, `Tests/desktop/file_manager1.py`) to show it.
extension DownloadsctlTests {
    var recentFile: String { bus.dataDirectory + "/recently-used.xbel" }

    /// What GLib reads in the bookmark file: each URI with its MIME type and applications.
    func recentItems() async throws -> [String: (mime: String, applications: [String])] {
        let output = try await run(["/usr/bin/python3", Self.recentScript, "list", recentFile])
        XCTAssertEqual(output.status, 0, output.description)
        let parsed = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: [Any]] ?? [:]
        return parsed.mapValues { ($0.first as? String ?? "", $0.last as? [String] ?? []) }
    }

    static var recentScript: String { PackageRoot.url.appendingPathComponent("Tests/desktop/recent_files.py").path }

    func testGetAddsTheFileToRecentAndNothingElseDoes() async throws {
        // Something another app put there stays.
        try FileManager.default.createDirectory(atPath: bus.dataDirectory, withIntermediateDirectories: true)
        let seeded = try await run([
            "/usr/bin/python3", Self.recentScript, "seed", recentFile, "file:///home/someone/notes.txt",
            "org.gnome.TextEditor", "text/plain",
        ])
        XCTAssertEqual(seeded.status, 0, seeded.description)
        http.set("/photo.png", Route(content: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Self.content(5000)))
        http.set("/quiet.bin", Route(content: Self.content(3000, seed: 2)))
        let target = directory.file("holiday photo #1.png")
        let got = try await ctl(["get", http.url("/photo.png"), "-o", target])
        XCTAssertEqual(got.status, 0, got.description)
        let uri = FileURIText.of(target)
        try await until("the file is in Recent") { try await self.recentItems()[uri] != nil }
        let items = try await recentItems()
        XCTAssertEqual(items[uri]?.mime, "image/png", "GIO's guess from the name and the bytes")
        XCTAssertEqual(items[uri]?.applications, ["org.example.Downloads"])
        XCTAssertEqual(items["file:///home/someone/notes.txt"]?.applications, ["org.gnome.TextEditor"], "kept")

        // --no-recent, a plain start, and an app's task with its desktop entry.
        let quiet = try await ctl(["get", "--no-recent", http.url("/quiet.bin"), "-o", directory.file("quiet.bin")])
        XCTAssertEqual(quiet.status, 0, quiet.description)
        let started = try await ctl(["start", http.url("/quiet.bin"), directory.file("started.bin")])
        XCTAssertEqual(started.status, 0, started.description)
        let app = try await start(
            http.url("/quiet.bin"), directory.file("app.bin"),
            ["add_to_recent": .boolean(true), "desktop_entry": .string("org.gnome.Epiphany.desktop")])
        try await waitState(app, ["finished"])
        let appFile = FileURIText.of(directory.file("app.bin"))
        try await until("the app's file is in Recent") { try await self.recentItems()[appFile] != nil }
        let after = try await recentItems()
        XCTAssertEqual(after[appFile]?.applications, ["org.gnome.Epiphany"], "the app that started it")
        XCTAssertNil(after[FileURIText.of(directory.file("quiet.bin"))], "--no-recent")
        XCTAssertNil(after[FileURIText.of(directory.file("started.bin"))], "add_to_recent defaults to false")
        XCTAssertEqual(after.count, 3, "\(after.keys.sorted())")
        let flag = try await property(app, "AddToRecent")
        XCTAssertEqual(flag?.boolValue, true)
    }

    /// A recently-used.xbel GLib cannot read (another program's half-written file, or garbage) is
    /// never replaced by one holding only our item: left as it was, the download still finished,
    /// and the daemon says why.
    func testARecentFileThatDoesNotParseIsLeftAlone() async throws {
        try FileManager.default.createDirectory(atPath: bus.dataDirectory, withIntermediateDirectories: true)
        let garbage = "<?xml version=\"1.0\"?>\n<xbel version=\"1.0\"><bookmark href=\"file:///a\">"
        try garbage.write(toFile: recentFile, atomically: true, encoding: .utf8)
        http.set("/f", Route(content: Self.content(2000)))
        let got = try await ctl(["get", http.url("/f"), "-o", directory.file("f")])
        XCTAssertEqual(got.status, 0, got.description)
        XCTAssertEqual(sha256(ofFile: directory.file("f")), Self.sha256(Self.content(2000)))
        try await until("the daemon says why it added nothing") {
            ((try? String(contentsOfFile: self.daemonLog, encoding: .utf8)) ?? "").contains(
                "not added to the recently used files")
        }
        XCTAssertEqual(try String(contentsOfFile: recentFile, encoding: .utf8), garbage, "left as it was")
    }

    func testShowAsksTheFileManagerToShowTheFile() async throws {
        // No file manager: a clear failure, not a hang.
        http.set("/ab.txt", Route(content: Self.content(2000)))
        let target = directory.file("a b#1.txt")
        let got = try await ctl(["get", "--no-recent", http.url("/ab.txt"), "-o", target])
        XCTAssertEqual(got.status, 0, got.description)
        let listed = try await call("ListTasks", [.string("")])
        let id = try XCTUnwrap(listed.first?.objectPathArrayValue?.first)
        let missing = try await ctl(["show", id.rawValue])
        XCTAssertEqual(missing.status, 1, missing.description)
        XCTAssertTrue(missing.stderr.contains("no file manager answered"), missing.stderr)

        let log = directory.file("file-manager.log")
        let manager = try ChildProcess(
            ["/usr/bin/python3", PackageRoot.url.appendingPathComponent("Tests/desktop/file_manager1.py").path, log],
            environment: bus.environment)
        defer { manager.stop() }
        try await until("the file manager on the bus") {
            try await self.client.nameOwner("org.freedesktop.FileManager1") != nil
        }
        let shown = try await ctl(["show", id.rawValue])
        XCTAssertEqual(shown.status, 0, shown.description)
        var slow = Route(content: Self.content(400_000))
        slow.bytesPerSecond = 50_000
        http.set("/slow", slow)
        let running = try await start(http.url("/slow"), directory.file("slow.bin"))
        let folder = try await ctl(["show", running.rawValue])
        XCTAssertEqual(folder.status, 0, folder.description)
        _ = try await call("Cancel", [.objectPath(running)])
        let calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
        XCTAssertEqual(calls.map { $0["method"] as? String }, ["ShowItems", "ShowFolders"])
        XCTAssertEqual(
            calls.first?["uris"] as? [String], [FileURIText.of(target)], "the file, its space and # percent-encoded")
        XCTAssertTrue(FileURIText.of(target).hasSuffix("/a%20b%231.txt"))
        XCTAssertEqual(calls.last?["uris"] as? [String], [FileURIText.of(directory.path)], "not there yet: its folder")
    }
}

/// The test's own file URI, written out here rather than taken from the code under test.
enum FileURIText {
    static func of(_ path: String) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/")
        return "file://" + (path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path)
    }
}
