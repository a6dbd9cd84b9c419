import DBus
import DownloadsAPI
import Foundation
import GRDB
import TestHTTPServer
import TestSupport
import XCTest

/// Downloads with mirrors end to end: gdbus and downloadsctl against the daemon and three local
/// servers (three origins), a pause with resume data and a kill -9 in the middle, and every
/// malformed `mirrors` refused; the source's SHA-256 at the end every time.
final class MirrorDownloadTests: DaemonTestCase {
    var mirrors: [TestHTTPServer] = []

    override func tearDown() async throws {
        for mirror in mirrors { mirror.stop() }
        try await super.tearDown()
    }

    /// The URL and two mirrors serving `content` at `rate` bytes a second per connection.
    func serve(_ content: [UInt8], rate: Int) throws -> [String] {
        var route = Route(content: content)
        route.bytesPerSecond = rate
        http.set("/f.iso", route)
        var urls = [http.url("/f.iso")]
        for _ in 0..<2 {
            let mirror = try TestHTTPServer()
            mirrors.append(mirror)
            mirror.set("/mirror/f.iso", route)
            urls.append(mirror.url("/mirror/f.iso"))
        }
        return urls
    }

    var ranged: [Int] {
        ([http!] + mirrors).map { $0.requests.filter { $0.range != nil && $0.status == 206 }.count }
    }

    func testAMirroredDownloadThroughGdbusUsesEverySource() async throws {
        let content = Self.content(6 << 20, seed: 41)
        let urls = try serve(content, rate: 2_000_000)
        let list = urls.dropFirst().map { "'\($0)'" }.joined(separator: ", ")
        let started = try await gdbus(
            "Start",
            [
                urls[0], directory.file("f.iso"),
                "{'mirrors': <[\(list)]>, 'checksum': <'sha256:\(Self.sha256(content))'>}",
            ])
        XCTAssertEqual(started.status, 0, started.description)
        let path = try ObjectPath(String(started.stdout.split(separator: "'")[1]))
        try await waitState(path, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("f.iso")), Self.sha256(content))
        XCTAssertTrue(ranged.allSatisfy { $0 > 0 }, "ranges from the URL and both mirrors: \(ranged)")
    }

    func testPauseAndKillDuringAMirroredDownloadResumeRight() async throws {
        let content = Self.content(12 << 20, seed: 42)
        let urls = try serve(content, rate: 1_000_000)
        let options: [String: DBusValue] = ["mirrors": .strings(Array(urls.dropFirst())), "connections": .uint32(6)]
        let task = try await start(urls[0], directory.file("f.iso"), options)
        try await waitBytes(task, atLeast: 2_000_000)
        let paused = try await call("Pause", [.objectPath(task)])
        let blob = try XCTUnwrap(paused.first?.bytesValue)
        XCTAssertTrue(
            String(decoding: blob, as: UTF8.self).contains("mirror/f.iso"), "the mirrors are in the resume data")
        _ = try await call("ResumeWithData", [.bytes(blob), .vardict([:])])
        try await waitBytes(task, atLeast: 5_000_000)
        // A kill -9 once more has arrived: the restart carries on from the recorded ranges.
        let id = Int64(try XCTUnwrap(DownloadsAPI.taskID(task)))
        try await until("a checkpoint past 4 MB") {
            let durable = try await DatabaseQueue(path: self.stateDirectory + "/downloads.sqlite").read { db in
                try Int64.fetchOne(db, sql: "SELECT durableOffset FROM task WHERE id = ?", arguments: [id]) ?? 0
            }
            return durable > 4_000_000
        }
        // For the next reader of a failure (seen twice, under a parallel release build's load: the
        // file finished with wrong bytes): the ranges recorded at the kill, the regions that differ,
        // and the log of the daemon that was killed.
        let firstLog = daemonLog
        killDaemon()
        let rows = try await DatabaseQueue(path: self.stateDirectory + "/downloads.sqlite").read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM segment").map { $0.description }
        }
        let durableAtKill = try await DatabaseQueue(path: self.stateDirectory + "/downloads.sqlite").read { db in
            try Int64.fetchOne(db, sql: "SELECT durableOffset FROM task WHERE id = ?", arguments: [id]) ?? 0
        }
        for mirror in [http!] + mirrors {
            mirror.update(mirror === http ? "/f.iso" : "/mirror/f.iso") { $0.bytesPerSecond = nil }
        }
        try await startDaemon()
        try await waitState(task, ["finished"], seconds: 60)
        let got = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: directory.file("f.iso")))) ?? Data())
        if got != content {
            var regions: [(Int, Int)] = []
            var i = 0
            while i < min(got.count, content.count) {
                if got[i] != content[i] {
                    let start = i
                    while i < min(got.count, content.count), got[i] != content[i] { i += 1 }
                    regions.append((start, i))
                } else {
                    i += 1
                }
            }
            print(
                "WRONG BYTES: size \(got.count) regions \(regions.prefix(20)) durableAtKill \(durableAtKill) segments \(rows)"
            )
            print("FIRSTLOG\n" + ((try? String(contentsOfFile: firstLog, encoding: .utf8)) ?? ""))
        }
        XCTAssertEqual(sha256(ofFile: directory.file("f.iso")), Self.sha256(content))
        XCTAssertTrue(
            mirrors.allSatisfy { $0.requests.count > 1 }, "both mirrors served after the restart too: \(ranged)")
    }

    func testDownloadsctlGetTakesMirrors() async throws {
        let content = Self.content(8 << 20, seed: 43)
        let urls = try serve(content, rate: 3_000_000)
        let out = try await run([
            PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "get", urls[0], "-o",
            directory.file("ctl.iso"),
            "--mirror", urls[1], "--mirror", urls[2], "--checksum", "sha256:" + Self.sha256(content),
        ])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: directory.file("ctl.iso")), Self.sha256(content))
        XCTAssertTrue(ranged.allSatisfy { $0 > 0 }, "\(ranged)")
    }

    func testMalformedMirrorsAreRefused() async throws {
        http.set("/ok", Route(content: Self.content(100)))
        let cases: [(DBusValue, String, String)] = [
            (.string(http.url("/ok")), "InvalidArgument", "must be of type as"),
            (.strings(["ftp://mirror.example/f"]), "InvalidArgument", "only http and https"),
            (.strings(["not a url"]), "InvalidArgument", "is not a URL"),
            (.strings((0..<33).map { "http://m\($0).example/f" }), "QuotaExceeded", "at most 32 mirrors"),
        ]
        for (value, name, reason) in cases {
            do {
                _ = try await call(
                    "Start", [.string(http.url("/ok")), .string(directory.file("x")), .vardict(["mirrors": value])])
                XCTFail("\(value) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.\(name)")
                XCTAssertTrue(error.message.contains(reason), "'\(error.message)' should say '\(reason)'")
            }
        }
    }

    // MARK: Metalink documents

    func meta4(_ urls: [(String, Int)], sha256: String, files: Int = 1) -> String {
        let entries = (0..<files).map { index in
            """
              <file name="f\(index).iso">
                <size>\(8 << 20)</size>
                <hash type="sha-256">\(sha256)</hash>
                <url>ftp://ftp.example/f.iso</url>
            """ + urls.map { "    <url priority=\"\($0.1)\">\($0.0)</url>\n" }.joined() + "  </file>\n"
        }.joined()
        return "<?xml version=\"1.0\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n\(entries)</metalink>\n"
    }

    func testAMetalinkDocumentGivesTheURLsAndTheChecksum() async throws {
        let content = Self.content(8 << 20, seed: 44)
        let urls = try serve(content, rate: 3_000_000)
        let document = meta4([(urls[0], 3), (urls[1], 1), (urls[2], 2)], sha256: Self.sha256(content))
        let reply = try await call(
            "Start",
            [
                .string(""), .string(directory.file("meta.iso")),
                .vardict([
                    "metalink": .bytes(Array(document.utf8))
                ]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        let url = try await property(task, "URL")
        XCTAssertEqual(url?.stringValue, urls[1], "the URL of priority 1")
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("meta.iso")), Self.sha256(content))
        XCTAssertTrue(ranged.allSatisfy { $0 > 0 }, "every http URL of the document served ranges: \(ranged)")

        // Its hash is the checksum: a document whose hash is wrong fails the download.
        let wrong = meta4([(urls[0], 1)], sha256: String(repeating: "0", count: 64))
        let failing = try await call(
            "Start",
            [
                .string(""), .string(directory.file("wrong.iso")),
                .vardict([
                    "metalink": .bytes(Array(wrong.utf8))
                ]),
            ])
        let failed = try XCTUnwrap(failing.first?.objectPathValue)
        try await waitState(failed, ["failed"])
        let error = try await property(failed, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.ChecksumMismatch")

        // downloadsctl reads a .meta4 as the caller and sends it.
        let path = directory.file("f.meta4")
        try document.write(toFile: path, atomically: true, encoding: .utf8)
        let out = try await run([
            PackageRoot.debugBinary("downloadsctl"), "--address", bus.address, "get", path, "-o",
            directory.file("ctl.iso"),
        ])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: directory.file("ctl.iso")), Self.sha256(content))

        // Or its path: the daemon reads it as the caller.
        let byPath = try await start("", directory.file("path.iso"), ["metalink": .string(path)])
        try await waitState(byPath, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("path.iso")), Self.sha256(content))
        for (value, reason) in [
            (DBusValue.string("relative.meta4"), "an absolute path"),
            (.string(directory.file("missing.meta4")), "cannot read the Metalink document"),
            (.string(directory.path), "not a regular file"),
            (.uint32(1), "must be of type ay (the document's bytes) or s (its path)"),
        ] {
            do {
                _ = try await call(
                    "Start", [.string(""), .string(directory.file("y.iso")), .vardict(["metalink": value])])
                XCTFail("taken: \(value)")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
                XCTAssertTrue(error.message.contains(reason), "'\(error.message)' should say '\(reason)'")
            }
        }

        // One file per task; a document that does not parse says why.
        for (bytes, reason) in [
            (Array(meta4([(urls[0], 1)], sha256: Self.sha256(content), files: 2).utf8), "describes 2"),
            (Array("<metalink/>".utf8), "not a Metalink v4 document"),
            (Array(meta4([("ftp://only.example/f", 1)], sha256: Self.sha256(content)).utf8), "no http or https URL"),
        ] {
            do {
                _ = try await call(
                    "Start", [.string(""), .string(directory.file("x.iso")), .vardict(["metalink": .bytes(bytes)])])
                XCTFail("taken: \(reason)")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
                XCTAssertTrue(error.message.contains(reason), "'\(error.message)' should say '\(reason)'")
            }
        }
    }

    // MARK: Piece hashes

    static let pieceLength = 256 << 10

    /// A `.meta4` for `content` with its SHA-256 and a SHA-256 for each piece.
    func meta4(pieces content: [UInt8], urls: [String], pieceCount: Int? = nil) -> String {
        let hashes = stride(from: 0, to: content.count, by: Self.pieceLength).prefix(pieceCount ?? Int.max).map {
            start in
            "      <hash>\(Self.sha256(Array(content[start..<min(content.count, start + Self.pieceLength)])))</hash>\n"
        }.joined()
        return """
            <?xml version="1.0"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="p.iso">
                <size>\(content.count)</size>
                <hash type="sha-256">\(Self.sha256(content))</hash>
                <pieces length="\(Self.pieceLength)" type="sha-256">
            \(hashes)    </pieces>

            """ + urls.enumerated().map { "    <url priority=\"\($0.offset + 1)\">\($0.element)</url>\n" }.joined()
                + "  </file>\n</metalink>\n"
    }

    /// `content` with one byte changed in every piece.
    static func corrupted(_ content: [UInt8]) -> [UInt8] {
        var bytes = content
        for start in stride(from: 1000, to: bytes.count, by: pieceLength) { bytes[start] ^= 0x5a }
        return bytes
    }

    func testACorruptMirrorCostsAPieceNotTheFile() async throws {
        let content = Self.content(8 << 20, seed: 45)
        let urls = try serve(content, rate: 1_500_000)
        // The second mirror serves a file of the same length with a wrong byte in every piece.
        var bad = Route(content: Self.corrupted(content))
        bad.bytesPerSecond = 1_500_000
        mirrors[1].set("/mirror/f.iso", bad)
        let reply = try await call(
            "Start",
            [
                .string(""), .string(directory.file("p.iso")),
                .vardict([
                    "metalink": .bytes(Array(meta4(pieces: content, urls: urls).utf8))
                ]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitState(task, ["finished"], seconds: 90)
        XCTAssertEqual(sha256(ofFile: directory.file("p.iso")), Self.sha256(content))
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertTrue(log.contains("does not match its hash; fetching it again"), log)
        XCTAssertTrue(log.contains("\(urls[2]) dropped: it served a corrupt piece"), log)
        XCTAssertFalse(log.contains("ChecksumMismatch"), "the whole file was never fetched again")
        XCTAssertTrue(log.contains("1 corrupt piece(s) fetched again (262144 bytes)"), log)
        // What the corrupt mirror sent is all that was fetched twice: one piece (a mirror not yet
        // proven by a matching piece has one connection, fetching one piece at a time). Beside it,
        // a response cut at its range's end may have had up to two of the server's chunks (rate/20
        // bytes each) counted as sent; a second corrupt piece (256 KiB) would not fit.
        let served = ([http!] + mirrors).map { $0.requests.reduce(0) { $0 + $1.bodyBytesSent } }
        XCTAssertGreaterThan(served[2], 0, "the corrupt mirror served ranges: \(served)")
        XCTAssertLessThanOrEqual(
            served.reduce(0, +) - content.count, Self.pieceLength + 150_000, "bytes fetched twice: \(served)")
    }

    func testAPieceNoSourceServesRightFailsTheTaskKeepingTheVerifiedPieces() async throws {
        let content = Self.content(4 << 20, seed: 46)
        var corrupt = content
        corrupt[3 * Self.pieceLength + 7] ^= 1
        http.set("/bad.iso", Route(content: corrupt))
        let document = meta4(pieces: content, urls: [http.url("/bad.iso")])
        let task = try await call(
            "Start",
            [
                .string(""), .string(directory.file("bad.iso")),
                .vardict([
                    "metalink": .bytes(Array(document.utf8))
                ]),
            ]
        ).first?.objectPathValue
        let path = try XCTUnwrap(task)
        try await waitState(path, ["failed"])
        let error = try await property(path, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.ChecksumMismatch")
        let message = try await property(path, "ErrorMessage")
        XCTAssertTrue(
            message?.stringValue?.contains("piece 3 (bytes 786432-1048575) did not match its hash 3 times") == true,
            "\(String(describing: message))")
        XCTAssertEqual(
            http.requests(for: "/bad.iso").filter { $0.range?.hasPrefix("bytes=786432-") == true }.count, 2,
            "the corrupt piece alone was asked for again, twice")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("bad.iso")), "nothing published")

        // Pieces that cannot describe the file's size are refused at Start.
        do {
            _ = try await call(
                "Start",
                [
                    .string(""), .string(directory.file("x.iso")),
                    .vardict([
                        "metalink": .bytes(
                            Array(meta4(pieces: content, urls: [http.url("/bad.iso")], pieceCount: 3).utf8))
                    ]),
                ])
            XCTFail("taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
            XCTAssertTrue(
                error.message.contains("gives 3 pieces of 262144 bytes for a file of 4194304 bytes"), error.message)
        }
    }

    /// The ranges the store holds as still to fetch for `task`.
    func recordedSegments(_ task: ObjectPath) async throws -> [(Int64, Int64)] {
        let id = Int64(try XCTUnwrap(DownloadsAPI.taskID(task)))
        return try await DatabaseQueue(path: stateDirectory + "/downloads.sqlite").read { db in
            try Row.fetchAll(
                db, sql: "SELECT start, \"end\" FROM segment WHERE taskID = ? ORDER BY start", arguments: [id]
            )
            .map { ($0["start"], $0["end"]) }
        }
    }

    func testVerifiedPiecesSurvivePauseResumeDataAndAKill() async throws {
        let content = Self.content(12 << 20, seed: 47)
        let urls = try serve(content, rate: 1_000_000)
        let length = Int64(content.count)
        let piece = Int64(Self.pieceLength)
        let reply = try await call(
            "Start",
            [
                .string(""), .string(directory.file("v.iso")),
                .vardict([
                    "metalink": .bytes(Array(meta4(pieces: content, urls: urls).utf8))
                ]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitBytes(task, atLeast: 2_000_000)
        let paused = try await call("Pause", [.objectPath(task)])
        let blob = try XCTUnwrap(paused.first?.bytesValue)
        let text = String(decoding: blob, as: UTF8.self)
        XCTAssertTrue(text.contains("\"pieces\""), "the piece hashes are in the resume data")
        // Only verified pieces are held: every recorded range to fetch starts and ends on a piece boundary.
        let atPause = try await recordedSegments(task)
        XCTAssertFalse(atPause.isEmpty)
        XCTAssertTrue(atPause.allSatisfy { $0.0 % piece == 0 && ($0.1 % piece == 0 || $0.1 == length) }, "\(atPause)")
        XCTAssertLessThan(atPause.reduce(0) { $0 + $1.1 - $1.0 }, length, "some pieces were verified and kept")
        _ = try await call("ResumeWithData", [.bytes(blob), .vardict([:])])
        try await until("a checkpoint past 5 MB") {
            try await self.recordedSegments(task).reduce(length) { $0 - ($1.1 - $1.0) } > 5_000_000
        }
        let atKill = try await recordedSegments(task)
        XCTAssertTrue(atKill.allSatisfy { $0.0 % piece == 0 && ($0.1 % piece == 0 || $0.1 == length) }, "\(atKill)")
        killDaemon()
        let before = ([http!] + mirrors).map { $0.requests.reduce(0) { $0 + $1.bodyBytesSent } }.reduce(0, +)
        for mirror in [http!] + mirrors {
            mirror.update(mirror === http ? "/f.iso" : "/mirror/f.iso") { $0.bytesPerSecond = nil }
        }
        try await startDaemon()
        try await waitState(task, ["finished"], seconds: 60)
        XCTAssertEqual(sha256(ofFile: directory.file("v.iso")), Self.sha256(content))
        // After the restart only the recorded ranges were fetched (the verified pieces were kept).
        let after = ([http!] + mirrors).map { $0.requests.reduce(0) { $0 + $1.bodyBytesSent } }.reduce(0, +) - before
        let recorded = atKill.reduce(0) { $0 + $1.1 - $1.0 }
        XCTAssertLessThanOrEqual(
            Int64(after), recorded + 2 * piece, "fetched after the restart: \(after), recorded to fetch: \(recorded)")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertFalse(log.contains("does not match its hash"), log)
    }

    func testAMetalinkURLIsFollowedToTheFileItDescribes() async throws {
        let content = Self.content(6 << 20, seed: 48)
        let urls = try serve(content, rate: 3_000_000)
        let document = Array(meta4(pieces: content, urls: urls).utf8)
        var route = Route(content: document)
        route.extraHeaders = [("Content-Type", "application/metalink4+xml")]
        http.set("/f.meta4", route)
        let folder = directory.file("into")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let task = try await start(http.url("/f.meta4"), folder)
        try await waitState(task, ["finished"])
        XCTAssertEqual(
            sha256(ofFile: folder + "/p.iso"), Self.sha256(content), "the file the document describes, under its name")
        let url = try await property(task, "URL")
        XCTAssertEqual(url?.stringValue, urls[0], "the document's first URL is the task's now (a restart goes there)")
        XCTAssertTrue(ranged.allSatisfy { $0 > 0 }, "the document's mirrors served ranges: \(ranged)")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertTrue(log.contains("is a Metalink document: \(urls[0]) and 2 mirror(s), 24 piece hashes"), log)

        // The same document given at Start, into a directory: the document's name again (made
        // unique beside the first).
        let byBytes = try await start("", folder, ["metalink": .bytes(document)])
        try await waitState(byBytes, ["finished"])
        XCTAssertEqual(sha256(ofFile: folder + "/p (1).iso"), Self.sha256(content))

        // Taken literally without use_metalink_headers: the document is the download.
        let literal = try await start(
            http.url("/f.meta4"), directory.file("literal.meta4"), ["use_metalink_headers": .boolean(false)])
        try await waitState(literal, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("literal.meta4")), Self.sha256(document))

        // A document that describes two files, or none it may go to, fails the task with a reason.
        var two = Route(content: Array(meta4([(urls[0], 1)], sha256: Self.sha256(content), files: 2).utf8))
        two.extraHeaders = route.extraHeaders
        http.set("/two.meta4", two)
        let failing = try await start(http.url("/two.meta4"), directory.file("two.iso"))
        try await waitState(failing, ["failed"])
        let error = try await property(failing, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.InvalidResponse")
        let message = try await property(failing, "ErrorMessage")
        XCTAssertTrue(
            message?.stringValue?.contains("describes 2 files: give a directory as the destination") == true,
            "\(String(describing: message))")
    }

    /// A followed document of several files, into a directory, is a group: the task fetches the
    /// first file, the others are new tasks of the group (a nested name's directory made), and
    /// the group ends with one GroupFinished; a restart keeps the task in its group.
    func testAFollowedMetalinkOfSeveralFilesIsAGroup() async throws {
        let first = Self.content(200_000, seed: 61), second = Self.content(300_000, seed: 62)
        http.set("/set/a.bin", Route(content: first))
        http.set("/set/b.bin", Route(content: second))
        let document = """
            <?xml version="1.0"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="a.bin"><hash type="sha-256">\(Self.sha256(first))</hash><url>\(http.url("/set/a.bin"))</url></file>
              <file name="maps/b.bin"><hash type="sha-256">\(Self.sha256(second))</hash><url>\(http.url("/set/b.bin"))</url></file>
            </metalink>
            """
        var route = Route(content: Array(document.utf8))
        route.extraHeaders = [("Content-Type", "application/metalink4+xml")]
        http.set("/set.meta4", route)
        let folder = directory.file("set")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let task = try await start(http.url("/set.meta4"), folder)
        try await waitState(task, ["finished"])
        let groups = try await call("ListGroups", [.string("")])
        let group = try XCTUnwrap(groups.first?.objectPathArrayValue?.first, "\(groups)")
        try await until("GroupFinished") { signalNames(for: group).contains("GroupFinished") }
        XCTAssertEqual(sha256(ofFile: folder + "/a.bin"), Self.sha256(first))
        XCTAssertEqual(sha256(ofFile: folder + "/maps/b.bin"), Self.sha256(second))
        let tasks = try await client.call(
            destination: "org.example.Downloads", path: group, interface: "org.freedesktop.DBus.Properties",
            method: "Get",
            arguments: [.string("org.example.Downloads.Group"), .string("Tasks")]
        ).first?.variantValue?.objectPathArrayValue
        XCTAssertEqual(tasks?.count, 2)
        XCTAssertEqual(tasks?.first, task, "the task that followed the document is the group's first file")
        // Its own signals still go out (the group's and the task's come in either order).
        try await until("the task's own Finished signal") { signalNames(for: task).contains("Finished") }
        // Kept through a restart: the task is still the group's.
        stopDaemon()
        try await startDaemon()
        let after = try await client.call(
            destination: "org.example.Downloads", path: group, interface: "org.freedesktop.DBus.Properties",
            method: "Get",
            arguments: [.string("org.example.Downloads.Group"), .string("Tasks")]
        ).first?.variantValue?.objectPathArrayValue
        XCTAssertEqual(after, tasks)
    }
}
