import DBus
import Foundation
import GRDB
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// What apps hand the service besides a URL, end to end through the bus: a title, a description
/// and their own metadata (properties, FindTasks, kept through a restart and in resume data), a
/// checksum of any common algorithm, and a time to begin; every malformed value refused.
final class TaskFieldsTests: DaemonTestCase {
    func startWithGdbus(_ url: String, _ destination: String, _ options: String) async throws -> ObjectPath {
        let started = try await gdbus("Start", [url, destination, options])
        XCTAssertEqual(started.status, 0, started.description)
        return try ObjectPath(String(started.stdout.split(separator: "'")[1]))
    }

    func find(_ match: [String: DBusValue]) async throws -> [ObjectPath] {
        try await call("FindTasks", [.vardict(match)]).first?.objectPathArrayValue ?? []
    }

    func testTitleDescriptionAndMetadataAreKeptShownAndFound() async throws {
        let content = Self.content(400_000, seed: 31)
        http.set("/episode.mp3", Route(content: content))
        http.set("/other.mp3", Route(content: Self.content(1000, seed: 32)))
        let sha512 = TestData.digest("sha512", content)
        let episode = try await startWithGdbus(
            http.url("/episode.mp3"), directory.file("episode.mp3"),
            """
            {'title': <'Episode 42: SQLite'>, 'description': <'The one about write-ahead logs'>, \
            'metadata': <{'app-id': <'podcasts'>, 'episode': <uint32 42>, 'explicit': <false>, 'rating': <4.5>}>, \
            'checksum': <'SHA512:\(sha512.uppercased())'>}
            """)
        let other = try await start(
            http.url("/other.mp3"), directory.file("other.mp3"),
            [
                "metadata": .vardict(["app-id": .string("podcasts"), "episode": .uint32(43)])
            ])
        try await waitState(episode, ["finished"])
        try await waitState(other, ["finished"])
        XCTAssertEqual(
            sha256(ofFile: directory.file("episode.mp3")), Self.sha256(content), "checked against its SHA-512 and kept")

        // Properties, read by busctl.
        let title = try await run([
            "busctl", "--address=\(bus.address)", "get-property", "org.example.Downloads", episode.rawValue,
            "org.example.Downloads.Task", "Title", "Description",
        ])
        XCTAssertEqual(
            title.stdout, "s \"Episode 42: SQLite\"\ns \"The one about write-ahead logs\"\n", title.description)
        let metadata = try await property(episode, "Metadata")
        XCTAssertEqual(
            metadata?.vardictValue,
            [
                "app-id": .string("podcasts"), "episode": .uint32(42), "explicit": .boolean(false),
                "rating": .double(4.5),
            ], "each value with the type it was given")
        let none = try await property(other, "Title")
        XCTAssertEqual(none?.stringValue, "", "no title: empty")

        // FindTasks: every key with its value, and its type.
        let both = try await find(["app-id": .string("podcasts")])
        XCTAssertEqual(both, [episode, other])
        let one = try await find(["app-id": .string("podcasts"), "episode": .uint32(42)])
        XCTAssertEqual(one, [episode])
        let wrongType = try await find(["episode": .int32(42)])
        XCTAssertEqual(wrongType, [], "an int32 42 is not the uint32 42 that was stored")
        let all = try await find([:])
        XCTAssertEqual(all, [episode, other], "an empty match is every task of the caller")
        let viaGdbus = try await gdbus("FindTasks", ["{'explicit': <false>}"])
        XCTAssertTrue(
            viaGdbus.stdout.contains("'\(episode.rawValue)'") && !viaGdbus.stdout.contains("'\(other.rawValue)'"),
            viaGdbus.description)

        // Kept through a restart.
        stopDaemon()
        try await startDaemon()
        let again = try await property(episode, "Metadata")
        XCTAssertEqual(again, metadata)
        let kept = try await property(episode, "Description")
        XCTAssertEqual(kept?.stringValue, "The one about write-ahead logs")
        let foundAgain = try await find(["episode": .uint32(43)])
        XCTAssertEqual(foundAgain, [other])
    }

    /// Resume data carries the fields: a task made from it (its source removed) has them.
    func testResumeDataCarriesTheFields() async throws {
        let content = Self.content(2_000_000, seed: 33)
        var route = Route(content: content)
        route.bytesPerSecond = 2_000_000
        http.set("/slow.iso", route)
        let task = try await start(
            http.url("/slow.iso"), directory.file("slow.iso"),
            [
                "title": .string("Debian 13"), "metadata": .vardict(["release": .string("trixie")]),
                "checksum": .string("md5:" + TestData.digest("md5", content)),
            ])
        try await waitBytes(task, atLeast: 300_000)
        let paused = try await call("Pause", [.objectPath(task)])
        let blob = try XCTUnwrap(paused.first?.bytesValue)
        XCTAssertTrue(String(decoding: blob, as: UTF8.self).contains(#""title":"Debian 13""#))
        _ = try await call("Cancel", [.objectPath(task)])
        _ = try await call("Cancel", [.objectPath(task)])  // the ended task is removed
        http.update("/slow.iso") { $0.bytesPerSecond = nil }
        let reply = try await call("ResumeWithData", [.bytes(blob), .vardict([:])])
        let resumed = try XCTUnwrap(reply.first?.objectPathValue)
        XCTAssertNotEqual(resumed, task)
        try await waitState(resumed, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("slow.iso")), Self.sha256(content))
        let title = try await property(resumed, "Title")
        XCTAssertEqual(title?.stringValue, "Debian 13")
        let found = try await find(["release": .string("trixie")])
        XCTAssertEqual(found, [resumed])
    }

    func testAChecksumMismatchNamesItsAlgorithmAndKeepsNothing() async throws {
        http.set("/f", Route(content: Self.content(50_000, seed: 34)))
        let task = try await start(
            http.url("/f"), directory.file("f"), ["checksum": .string("sha1:" + String(repeating: "0", count: 40))])
        try await waitState(task, ["failed"])
        let error = try await property(task, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.ChecksumMismatch")
        let message = try await property(task, "ErrorMessage")
        XCTAssertTrue(message?.stringValue?.hasPrefix("SHA-1 of the download is ") == true, "\(message as Any)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("f")))
    }

    func testEveryMalformedFieldIsRefusedWithAReason() async throws {
        http.set("/ok", Route(content: Self.content(100)))
        let now = UInt64(Date().timeIntervalSince1970)
        let cases: [([String: DBusValue], String)] = [
            (["title": .string(String(repeating: "t", count: 1025))], "title is 1025 bytes; at most 1024"),
            (["title": .string("two\nlines")], "title must not contain control characters"),
            (["description": .string("bell\u{7}")], "description must not contain control characters"),
            (["title": .uint32(1)], "option 'title' must be of type s"),
            (["metadata": .string("x")], "option 'metadata' must be of type a{sv}"),
            (["metadata": .vardict(["tags": .strings(["a"])])], "metadata 'tags' is of type as"),
            (["metadata": .vardict(["": .string("x")])], "metadata keys are 1 to 255 bytes"),
            (["metadata": .vardict(["big": .string(String(repeating: "x", count: 4100))])], "at most 4096"),
            (["metadata": .vardict(["nan": .double(.nan)])], "not a finite number"),
            (["checksum": .string("crc32:00000000")], "unknown checksum algorithm 'crc32'"),
            (["checksum": .string("sha256:abc")], "even number"),
            (["checksum": .string("sha256:abcd")], "is 64 hexadecimal digits, got 4"),
            (["checksum": .string("d41d8cd98f00b204e9800998ecf8427e")], "ALGO:HEX"),
            (
                [
                    "checksum": .string("md5:" + String(repeating: "0", count: 32)),
                    "sha256": .string(String(repeating: "0", count: 64)),
                ],
                "not both"
            ),
            (["earliest_begin": .uint64(1)], "seconds in the past"),
            (["earliest_begin": .uint64(now + 400 * 86_400)], "more than a year ahead"),
            (["earliest_begin": .uint64(UInt64.max)], "more than a year ahead"),
            (["earliest_begin": .int64(Int64(now))], "must be of type t"),
        ]
        for (options, reason) in cases {
            do {
                _ = try await call(
                    "Start", [.string(http.url("/ok")), .string(directory.file("x")), .vardict(options)])
                XCTFail("\(options) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", "\(options)")
                XCTAssertTrue(error.message.contains(reason), "\(options): '\(error.message)' should say '\(reason)'")
            }
        }
        let tasks = try await call("ListTasks", [.string("")])
        XCTAssertEqual(tasks, [.objectPaths([])], "nothing was created")
    }

    /// `earliest_begin`: queued with WaitingFor `begin-time` until then (through a restart),
    /// then it begins by itself; PropertiesChanged says when it stops waiting.
    func testATaskBeginsAtItsEarliestBeginTime() async throws {
        let content = Self.content(200_000, seed: 35)
        http.set("/soon", Route(content: content))
        http.set("/tomorrow", Route(content: content))
        let changes = NIOLockedValueBox([(String, String)]())
        try await client.subscribe(MatchRule(interface: "org.freedesktop.DBus.Properties")) { message in
            guard let arguments = try? message.arguments(), arguments.count > 1,
                let waiting = arguments[1].vardictValue?["WaitingFor"]?.stringValue
            else { return }
            changes.withLockedValue { $0.append((message.path?.rawValue ?? "", waiting)) }
        }
        let now = UInt64(Date().timeIntervalSince1970)
        let later = try await start(
            http.url("/tomorrow"), directory.file("tomorrow"), ["earliest_begin": .uint64(now + 86_400)])
        let soon = try await start(http.url("/soon"), directory.file("soon"), ["earliest_begin": .uint64(now + 3)])
        let waiting = try await property(soon, "WaitingFor")
        XCTAssertEqual(waiting?.stringValue, "begin-time")
        let state = try await property(soon, "State")
        XCTAssertEqual(state?.stringValue, "queued")
        // A restart keeps both waiting.
        stopDaemon()
        try await startDaemon()
        let afterRestart = try await property(later, "WaitingFor")
        XCTAssertEqual(afterRestart?.stringValue, "begin-time")
        try await waitState(soon, ["finished"], seconds: 30)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince1970, Double(now + 3), "not before its time")
        XCTAssertEqual(sha256(ofFile: directory.file("soon")), Self.sha256(content))
        try await until("PropertiesChanged says it stopped waiting for its time") {
            changes.withLockedValue { $0 }.contains { $0.0 == soon.rawValue && $0.1 != "begin-time" }
        }
        XCTAssertTrue(http.requests(for: "/tomorrow").isEmpty, "tomorrow's task has not begun")
        let stillWaiting = try await property(later, "WaitingFor")
        XCTAssertEqual(stillWaiting?.stringValue, "begin-time")
        // Paused and resumed, it keeps its time.
        _ = try await call("Pause", [.objectPath(later)])
        _ = try await call("Resume", [.objectPath(later)])
        let resumed = try await property(later, "WaitingFor")
        XCTAssertEqual(resumed?.stringValue, "begin-time")
    }
}
