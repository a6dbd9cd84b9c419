import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `share` through the daemon: a finished download offered by its SHA-256 on Passim's wire
/// (curl -k as Passim's client asks), `ListShared` and `Unshare`, the server listening only while
/// something is shared, and what is refused: `share` without a SHA-256, its terms without it,
/// another hash, and `share` when the administrator said `--lan-peers fetch`.
final class SharingTests: DaemonTestCase {
    var sharePort = 0
    var lanPeers = "share"
    override var extraArguments: [String] { ["--share-port", String(sharePort), "--lan-peers", lanPeers] }

    override func setUp() async throws {
        sharePort = try FreePort.pick()
        try await super.setUp()
    }

    func listShared() async throws -> [[String: DBusValue]] {
        let reply = try await call("ListShared")
        guard case .array(_, let entries) = reply.first else { return [] }
        return entries.compactMap(\.vardictValue)
    }

    func curl(_ target: String) async throws -> (status: Int, body: String) {
        let body = directory.file("curl-\(UUID().uuidString)")
        let out = try await run(
            [
                "curl", "-sk", "--max-time", "10", "-o", body, "-w", "%{http_code}",
                "https://127.0.0.1:\(sharePort)\(target)",
            ])
        return (Int(out.stdout) ?? -1, body)
    }

    func testAFinishedFileIsOfferedByItsHashListedAndWithdrawn() async throws {
        let before = try await curl("/").status
        XCTAssertEqual(before, 0, "nothing listens while nothing is shared")
        let content = Self.content(2_000_000, seed: 78)
        let hash = Self.sha256(content)
        http.set("/fw.bin", Route(content: content))
        let task = try await start(
            http.url("/fw.bin"), directory.file("fw.bin"),
            ["checksum": .string("sha256:\(hash)"), "share": .boolean(true), "share_limit": .uint32(3)])
        let state = try await waitState(task, ["finished", "failed"])
        XCTAssertEqual(state, "finished")
        var listed: [[String: DBusValue]] = []
        try await until("the file is listed as shared") {
            listed = try await listShared()
            return !listed.isEmpty
        }
        let entry = try XCTUnwrap(listed.first)
        XCTAssertEqual(entry["sha256"]?.stringValue, hash)
        XCTAssertEqual(entry["name"]?.stringValue, "fw.bin")
        XCTAssertEqual(entry["size"]?.uint64Value, 2_000_000)
        XCTAssertEqual(entry["shares"]?.uint32Value, 0)
        XCTAssertEqual(entry["share_limit"]?.uint32Value, 3)
        XCTAssertEqual(entry["task"]?.objectPathValue, task)
        let expires = try XCTUnwrap(entry["expires"]?.int64Value)
        XCTAssertEqual(Double(expires), Date().timeIntervalSince1970 + 86_400, accuracy: 60)

        // As Passim's client asks for it.
        let got = try await curl("/fw.bin?sha256=\(hash)")
        XCTAssertEqual(got.status, 200)
        XCTAssertEqual(sha256(ofFile: got.body), hash)
        let counted = try await listShared().first?["shares"]?.uint32Value
        XCTAssertEqual(counted, 1)
        let other = try await curl("/fw.bin?sha256=\(String(repeating: "0", count: 64))").status
        XCTAssertEqual(other, 403)

        do {
            try await _ = call("Unshare", [.string(String(repeating: "1", count: 64))])
            XCTFail("a hash not shared was withdrawn")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.NotFound")
        }
        _ = try await call("Unshare", [.string(hash.uppercased())])
        let empty = try await listShared()
        XCTAssertTrue(empty.isEmpty)
        try await until("the server stops listening once nothing is shared") {
            try await curl("/fw.bin?sha256=\(hash)").status == 0
        }
    }

    /// A shared file moved (as apt moves a package from `partial/` into its archives once it has
    /// it) is still the file that was shared, and served; removed, it is withdrawn, though the
    /// service held it open.
    func testAMovedFileIsStillServedAndARemovedOneWithdrawn() async throws {
        let content = Self.content(500_000, seed: 79)
        let hash = Self.sha256(content)
        http.set("/pkg.deb", Route(content: content))
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        let task = try await start(
            http.url("/pkg.deb"), partial + "/pkg.deb",
            ["checksum": .string("sha256:\(hash)"), "share": .boolean(true)])
        try await waitState(task, ["finished"])
        try await until("the file is listed as shared") { try await !self.listShared().isEmpty }
        try FileManager.default.moveItem(atPath: partial + "/pkg.deb", toPath: directory.file("pkg.deb"))
        let moved = try await curl("/pkg.deb?sha256=\(hash)")
        XCTAssertEqual(moved.status, 200)
        XCTAssertEqual(sha256(ofFile: moved.body), hash)

        try FileManager.default.removeItem(atPath: directory.file("pkg.deb"))
        let removed = try await curl("/pkg.deb?sha256=\(hash)").status
        XCTAssertEqual(removed, 403)
        try await until("withdrawn once found removed") { try await self.listShared().isEmpty }
    }

    func testShareIsRefusedWithoutAHashAndWhenTheAdministratorSaidNo() async throws {
        http.set("/x", Route(content: Array("x".utf8)))
        for (options, words) in [
            (["share": DBusValue.boolean(true)], "give checksum sha256:"),
            (["share": .boolean(true), "checksum": .string("md5:\(String(repeating: "0", count: 32))")], "SHA-256"),
            (["share_limit": .uint32(2)], "go with share: true"),
            (
                [
                    "share": .boolean(true), "share_max_age": .uint32(0),
                    "checksum": .string("sha256:\(String(repeating: "0", count: 64))"),
                ], "share_max_age"
            ),
        ] {
            do {
                _ = try await start(http.url("/x"), directory.file("x"), options)
                XCTFail("\(options) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", "\(options)")
                XCTAssertTrue(error.message.contains(words), error.message)
            }
        }
        stopDaemon()
        lanPeers = "fetch"
        try await startDaemon()
        do {
            _ = try await start(
                http.url("/x"), directory.file("x"),
                ["share": .boolean(true), "checksum": .string("sha256:\(String(repeating: "0", count: 64))")])
            XCTFail("share taken under --lan-peers fetch")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.AccessDenied", error.message)
        }
        let none = try await listShared()
        XCTAssertTrue(none.isEmpty)
    }

    func testWhatWasSharedIsOfferedAgainAfterARestartUnlessItChanged() async throws {
        var hashes: [String] = []
        for name in ["kept", "changed"] {
            let content = Self.content(100_000, seed: name == "kept" ? 1 : 2)
            hashes.append(Self.sha256(content))
            http.set("/\(name)", Route(content: content))
            let task = try await start(
                http.url("/\(name)"), directory.file(name),
                ["checksum": .string("sha256:\(hashes.last ?? "")"), "share": .boolean(true)])
            let state = try await waitState(task, ["finished", "failed"])
            XCTAssertEqual(state, "finished")
        }
        try await until("both are shared") { try await listShared().count == 2 }
        let first = try await curl("/kept?sha256=\(hashes[0])")
        XCTAssertEqual(first.status, 200)
        try await until("the download is counted") {
            try await listShared().first { $0["sha256"]?.stringValue == hashes[0] }?["shares"]?.uint32Value == 1
        }
        stopDaemon()
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: directory.file("changed")))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("x".utf8))
        try handle.close()
        try await startDaemon()
        var listed: [[String: DBusValue]] = []
        try await until("the kept file is offered again") {
            listed = try await listShared()
            return !listed.isEmpty
        }
        XCTAssertEqual(listed.map { $0["sha256"]?.stringValue }, [hashes[0]], "the changed file is not")
        XCTAssertEqual(listed.first?["shares"]?.uint32Value, 1, "its downloads still counted")
        let again = try await curl("/kept?sha256=\(hashes[0])")
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(sha256(ofFile: again.body), hashes[0])
        let changed = try await curl("/changed?sha256=\(hashes[1])")
        XCTAssertEqual(changed.status, 403)
    }
}
