import DBus
import DownloadsAPI
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `downloadsctl get` of several files as one group, `get FILE.meta4` of several files, and
/// `downloadsctl group list/status/pause/resume/cancel`.
extension DownloadsctlTests {
    func testGetOfSeveralFilesIsOneGroupAndGroupCommandsControlIt() async throws {
        let a = Self.content(40_000, seed: 70), b = Self.content(50_000, seed: 71)
        http.set("/ga.bin", Route(content: a))
        http.set("/gb.bin", Route(content: b))
        let into = directory.file("grouped")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)
        let out = try await ctl(["get", "--atomic", http.url("/ga.bin"), http.url("/gb.bin"), "-o", into])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(Set(lines(out.stdout)), [into + "/ga.bin", into + "/gb.bin"])
        XCTAssertEqual(sha256(ofFile: into + "/gb.bin"), Self.sha256(b))
        let groups = try await call("ListGroups", [.string("")])
        XCTAssertEqual(groups, [.objectPaths([])], "the group went with its files, removed once they landed")

        // A slow group: status, pause with resume data, resume from it, cancel.
        var slow = Route(content: Self.content(2_000_000, seed: 72))
        slow.bytesPerSecond = 200_000
        http.set("/s1.bin", slow)
        http.set("/s2.bin", slow)
        let reply = try await call(
            "StartGroup",
            [
                .array(
                    element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                    [
                        .structure([.string(http.url("/s1.bin")), .string(into + "/s1.bin"), .vardict([:])]),
                        .structure([.string(http.url("/s2.bin")), .string(into + "/s2.bin"), .vardict([:])]),
                    ]),
                .vardict(["title": .string("two slow"), "atomic": .boolean(true)]),
            ])
        let group = try XCTUnwrap(reply.first?.objectPathValue)
        let id = String(try XCTUnwrap(DownloadsAPI.groupID(group)))
        let listed = try await ctl(["group", "list"])
        XCTAssertEqual(listed.status, 0, listed.description)
        XCTAssertTrue(listed.stdout.contains("0 of 2"), listed.stdout)
        XCTAssertTrue(listed.stdout.contains("two slow"), listed.stdout)
        let status = try await ctl(["group", "status", id, "--json"])
        let object = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any], status.stdout)
        XCTAssertEqual(object["files"] as? Int, 2)
        XCTAssertEqual(object["atomic"] as? Bool, true)
        let data = directory.file("group.resume")
        let paused = try await ctl(["group", "pause", id, "--resume-data", data])
        XCTAssertEqual(paused.stdout, "paused group \(id)\n", paused.description)
        XCTAssertTrue(
            try String(contentsOfFile: data, encoding: .utf8).hasPrefix("org.example.Downloads.GroupResumeData/1\n"))
        let resumed = try await ctl(["group", "resume", "--resume-data", data])
        XCTAssertEqual(resumed.stdout, "\(id)\n", resumed.description)
        let cancelled = try await ctl(["group", "cancel", id])
        XCTAssertEqual(cancelled.stdout, "cancelled group \(id)\n", cancelled.description)
        try await until("the group's files cancelled") {
            let state = try await ctl(["group", "status", id, "--json"]).stdout
            return state.contains("\"state\":\"cancelled\"")
        }
        let missing = try await ctl(["group", "pause", "99"])
        XCTAssertEqual(missing.status, 1, missing.description)
        XCTAssertEqual(missing.stderr, "downloadsctl: no group at /org/example/Downloads/groups/99\n")
    }

    func testGetOfAMetalinkFileOfSeveralFilesLandsThemAll() async throws {
        let a = Self.content(30_000, seed: 73), b = Self.content(20_000, seed: 74)
        http.set("/ml/a.bin", Route(content: a))
        http.set("/ml/b.bin", Route(content: b))
        let document = """
            <?xml version="1.0"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="a.bin"><hash type="sha-256">\(Self.sha256(a))</hash><url>\(http.url("/ml/a.bin"))</url></file>
              <file name="maps/b.bin"><hash type="sha-256">\(Self.sha256(b))</hash><url>\(http.url("/ml/b.bin"))</url></file>
            </metalink>
            """
        let file = directory.file("set.meta4")
        try document.write(toFile: file, atomically: true, encoding: .utf8)
        let into = directory.file("set")
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: false)
        let out = try await ctl(["get", file, "-o", into])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(Set(lines(out.stdout)), [into + "/a.bin", into + "/maps/b.bin"], out.description)
        XCTAssertEqual(sha256(ofFile: into + "/maps/b.bin"), Self.sha256(b))
        XCTAssertTrue(out.stderr.hasPrefix("downloaded 2 of 2 files"), out.stderr)
    }
}
