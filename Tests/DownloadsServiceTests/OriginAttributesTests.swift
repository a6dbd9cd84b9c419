import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A finished download says where it came from as Chromium and `wget --xattr` say it: the
/// freedesktop `user.xdg.origin.url` (and `user.xdg.referrer.url` with the `referrer` option),
/// read back with `getfattr` as people do; never with credentials, never for an app that opted
/// out or a daemon told not to, and a file system that keeps no user attributes is no failure.
final class OriginAttributesTests: DaemonTestCase {
    /// The daemon's flags for its next start.
    var flags: [String] = []
    override var extraArguments: [String] { flags }
    var mounts: [String] = []

    override func tearDown() async throws {
        try await super.tearDown()
        for mount in mounts.reversed() { _ = try? await ProcessRunner.run(["umount", "-l", mount]) }
    }

    /// The `user.` attributes of `path` as `getfattr -d` prints them (name → value).
    func attributes(_ path: String) async throws -> [String: String] {
        let output = try await run(["getfattr", "--absolute-names", "-d", "-m", "^user\\.", "-e", "text", path])
        XCTAssertEqual(output.status, 0, output.description)
        var result: [String: String] = [:]
        for line in output.stdout.split(separator: "\n") where !line.hasPrefix("#") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            var value = String(line[line.index(after: equals)...])
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            result[String(line[..<equals])] = value
        }
        return result
    }

    func testAFinishedFileSaysWhereItCameFromWithoutCredentials() async throws {
        let content = Self.content(200_000, seed: 61)
        http.set("/iso/debian.iso", Route(content: content))
        http.set("/named", Route(content: content))
        // The URL's user and password go out as Authorization (Start takes them out), never onto the
        // file; nor does a signed URL's query, a bearer token every user who reads the file would see.
        let withCredentials =
            http.url("/iso/debian.iso").replacingOccurrences(of: "http://", with: "http://ann:s3cret@")
            + "?X-Amz-Signature=abc123&token=t0ps3cret#part"
        let task = try await start(
            withCredentials, directory.file("debian.iso"),
            ["referrer": .string("http://bob:hunter2@127.0.0.1/releases/?page=2")])
        // Into a directory, the name the server gives: the attributes go with whatever name it took.
        let named = try await start(
            http.url("/named"), directory.path, ["referrer": .string("https://example.org/downloads")])
        try await waitState(task, ["finished"])
        try await waitState(named, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("debian.iso")), Self.sha256(content))
        let found = try await attributes(directory.file("debian.iso"))
        XCTAssertEqual(
            found,
            [
                "user.xdg.origin.url": http.url("/iso/debian.iso"),
                "user.xdg.referrer.url": "http://127.0.0.1/releases/",
            ], "the task's URL and the page, credentials, query and fragment taken out")
        let other = try await attributes(directory.file("named"))
        XCTAssertEqual(other["user.xdg.origin.url"], http.url("/named"))
        XCTAssertEqual(other["user.xdg.referrer.url"], "https://example.org/downloads")
        // The referrer is sent as Referer too; an https page never to a plain http server.
        XCTAssertEqual(
            http.requests(for: "/iso/debian.iso").map { $0.userHeaders["referer"] },
            ["http://127.0.0.1/releases/?page=2"])
        XCTAssertEqual(http.requests(for: "/named").map { $0.userHeaders["referer"] }, [nil], "no downgrade")
        // The app's own Referer header wins over the option.
        http.set("/own", Route(content: content))
        let own = try await start(
            http.url("/own"), directory.file("own"),
            ["referrer": .string("http://127.0.0.1/a"), "headers": .stringDict(["Referer": "http://127.0.0.1/b"])])
        try await waitState(own, ["finished"])
        XCTAssertEqual(http.requests(for: "/own").map { $0.userHeaders["referer"] }, ["http://127.0.0.1/b"])
    }

    /// An atomic group's files are placed by the group, each by the same publish: each says
    /// where it came from, and a per-file `referrer` is its own.
    func testAnAtomicGroupsFilesSayWhereTheyCameFrom() async throws {
        http.set("/a.bin", Route(content: Self.content(20_000, seed: 66)))
        http.set("/b.bin", Route(content: Self.content(30_000, seed: 67)))
        let folder = directory.file("set")
        let entries: [DBusValue] = [
            .structure([.string(http.url("/a.bin")), .string(folder + "/a.bin"), .vardict([:])]),
            .structure([
                .string(http.url("/b.bin")), .string(folder + "/b.bin"),
                .vardict(["referrer": .string("http://127.0.0.1/b-page")]),
            ]),
        ]
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let reply = try await call(
            "StartGroup",
            [
                .array(element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]), entries),
                .vardict(["atomic": .boolean(true)]),
            ])
        guard reply.count == 2, case .array(_, let tasks) = reply[1] else { return XCTFail("\(reply)") }
        for task in tasks.compactMap(\.objectPathValue) { try await waitState(task, ["finished"]) }
        let a = try await attributes(folder + "/a.bin")
        let b = try await attributes(folder + "/b.bin")
        XCTAssertEqual(a, ["user.xdg.origin.url": http.url("/a.bin")])
        XCTAssertEqual(
            b, ["user.xdg.origin.url": http.url("/b.bin"), "user.xdg.referrer.url": "http://127.0.0.1/b-page"])
    }

    func testAnAppThatOptsOutAndADaemonToldNotToLeaveNone() async throws {
        http.set("/private", Route(content: Self.content(50_000, seed: 62)))
        let task = try await start(
            http.url("/private"), directory.file("private"),
            ["origin_attributes": .boolean(false), "referrer": .string("http://127.0.0.1/secret-page")])
        try await waitState(task, ["finished"])
        let optedOut = try await attributes(directory.file("private"))
        XCTAssertEqual(optedOut, [:], "origin_attributes false: nothing of where it came from")
        XCTAssertEqual(
            http.requests(for: "/private").map { $0.userHeaders["referer"] }, ["http://127.0.0.1/secret-page"],
            "the option is about the file; the request still says its page")

        stopDaemon()
        flags = ["--no-origin-attributes"]
        try await startDaemon()
        let asked = try await start(
            http.url("/private"), directory.file("asked"), ["origin_attributes": .boolean(true)])
        try await waitState(asked, ["finished"])
        let none = try await attributes(directory.file("asked"))
        XCTAssertEqual(none, [:], "--no-origin-attributes: for nobody, whatever a task asks")
    }

    /// tmpfs keeps user attributes on this kernel (Linux 6.6 on); ramfs keeps none: there the
    /// download still finishes, and the daemon says why once, not once a file.
    func testAFileSystemWithoutUserAttributesIsNoFailure() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: mounts a tmpfs and a ramfs") }
        let tmpfs = directory.file("tmpfs"), ramfs = directory.file("ramfs")
        for (path, type) in [(tmpfs, "tmpfs"), (ramfs, "ramfs")] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            let mounted = try await run(["mount", "-t", type, "none", path])
            XCTAssertEqual(mounted.status, 0, mounted.description)
            mounts.append(path)
        }
        let content = Self.content(100_000, seed: 63)
        http.set("/f", Route(content: content))
        var tasks: [ObjectPath] = []
        for destination in [tmpfs + "/f", ramfs + "/one", ramfs + "/two"] {
            tasks.append(try await start(http.url("/f"), destination))
        }
        for task in tasks { try await waitState(task, ["finished"]) }
        for name in ["one", "two"] { XCTAssertEqual(sha256(ofFile: ramfs + "/" + name), Self.sha256(content)) }
        let kept = try await attributes(tmpfs + "/f")
        XCTAssertEqual(kept["user.xdg.origin.url"], http.url("/f"))
        let none = try await run(["getfattr", "--absolute-names", "-d", ramfs + "/one"])
        XCTAssertEqual(none.stdout, "", none.description)
        let log = (try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? ""
        let said = log.components(separatedBy: "published without user.xdg.origin.url").count - 1
        XCTAssertEqual(said, 1, "said once, with the reason: \(log)")
        XCTAssertTrue(log.contains("Operation not supported"), log)
    }

    func testBadReferrersAndMisplacedOptionsAreRefused() async throws {
        for (options, expected) in [
            (["referrer": DBusValue.string("ftp://example.org/")], "referrer: only http and https"),
            (["referrer": .string("not a url")], "referrer:"),
            (["referrer": .uint32(1)], "option 'referrer' must be of type s"),
            (["origin_attributes": .string("yes")], "option 'origin_attributes' must be of type b"),
            (["add_to_recent": .uint32(1)], "option 'add_to_recent' must be of type b"),
        ] {
            do {
                _ = try await start(http.url("/x"), directory.file("x"), options)
                XCTFail("\(options) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", "\(options)")
                XCTAssertTrue(error.message.contains(expected), "\(options): \(error.message)")
            }
        }
        // A file the service uploads is the user's already: nothing of a download's origin applies.
        let source = directory.file("up")
        FileManager.default.createFile(atPath: source, contents: Data([1, 2, 3]))
        do {
            _ = try await call(
                "Upload", [.string(http.url("/u")), .string(source), .vardict(["referrer": .string("http://a/")])])
            XCTFail("an upload took referrer")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
        }
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertEqual(listed, [.objectPaths([])], "nothing was started")
    }
}
