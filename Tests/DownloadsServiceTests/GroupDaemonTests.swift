import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Groups through the daemon on a private bus: `StartGroup` from busctl, the group object's
/// properties, one `GroupFinished` and no per-task signals, an atomic group with a 404.
final class GroupDaemonTests: DaemonTestCase {
    func startGroup(_ files: [(String, String)], atomic: Bool = false) async throws -> (ObjectPath, [ObjectPath]) {
        let entries = files.map { DBusValue.structure([.string($0.0), .string($0.1), .vardict([:])]) }
        let reply = try await call(
            "StartGroup",
            [
                .array(element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]), entries),
                .vardict(["atomic": .boolean(atomic), "title": .string("assets")]),
            ])
        let group = try XCTUnwrap(reply.first?.objectPathValue)
        guard case .array(_, let tasks) = reply[1] else { throw XCTSkip("no task list") }
        return (group, tasks.compactMap(\.objectPathValue))
    }

    func groupProperty(_ path: ObjectPath, _ name: String) async throws -> DBusValue? {
        try await client.call(
            destination: "org.example.Downloads", path: path, interface: "org.freedesktop.DBus.Properties",
            method: "Get", arguments: [.string("org.example.Downloads.Group"), .string(name)]
        ).first?.variantValue
    }

    /// `--max-tasks-per-user` for the daemon's next start (nil: its default, 1,000).
    var tasksPerUser: Int?
    override var extraArguments: [String] { tasksPerUser.map { ["--max-tasks-per-user", "\($0)"] } ?? [] }

    func testAThousandFilesFinishWithOneGroupFinishedAndNoTaskSignals() async throws {
        var contents: [[UInt8]] = []
        for index in 0..<1000 {
            let content = Self.content(2_000 + index, seed: UInt32(index + 1))
            contents.append(content)
            http.set("/g\(index)", Route(content: content))
        }
        let (group, tasks) = try await startGroup(
            (0..<1000).map { (http.url("/g\($0)"), directory.file("g\($0).bin")) })
        XCTAssertEqual(tasks.count, 1000)
        try await until("GroupFinished", seconds: 120) { signalNames(for: group).contains("GroupFinished") }
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("g\(index).bin")), Self.sha256(content))
        }
        let value1 = try await groupProperty(group, "State")?.stringValue
        XCTAssertEqual(value1, "finished")
        let value2 = try await groupProperty(group, "FilesFinished")
        XCTAssertEqual(value2, .uint32(1000))
        let value3 = try await groupProperty(group, "Title")?.stringValue
        XCTAssertEqual(value3, "assets")
        XCTAssertEqual(signalNames(for: group).filter { $0 == "GroupFinished" }.count, 1)
        let taskSignals = signals.withLockedValue { $0 }.filter {
            !["GroupProgress", "GroupFinished", "EventsFinished"].contains($0.0)
        }
        XCTAssertEqual(taskSignals.map(\.0), [], "task_signals is false by default: only the group's signals")
        // The tasks' own properties stay readable.
        let value4 = try await property(tasks[3], "State")?.stringValue
        XCTAssertEqual(value4, "finished")
        let listed = try await call("ListGroups", [.string("")])
        XCTAssertEqual(listed.first, .objectPaths([group]))
    }

    func testAnAtomicGroupWithA404PublishesNothingAndResumesWhole() async throws {
        let good = Self.content(50_000, seed: 7)
        let fixed = Self.content(40_000, seed: 8)
        http.set("/good", Route(content: good))
        let (group, _) = try await startGroup(
            [(http.url("/good"), directory.file("good.bin")), (http.url("/missing"), directory.file("missing.bin"))],
            atomic: true
        )
        try await until("GroupFailed") { signalNames(for: group).contains("GroupFailed") }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("good.bin")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("missing.bin")))
        let value5 = try await groupProperty(group, "State")?.stringValue
        XCTAssertEqual(value5, "failed")
        let failed = signals.withLockedValue { $0 }.first { $0.0 == "GroupFailed" }
        XCTAssertEqual(failed?.1[1].stringValue, "org.example.Downloads.Error.HTTPError")

        http.set("/missing", Route(content: fixed))
        let resumed = try await gdbus("Resume", [], object: group.rawValue, interface: "org.example.Downloads.Group")
        XCTAssertEqual(resumed.status, 0, resumed.description)
        try await until("GroupFinished") { signalNames(for: group).contains("GroupFinished") }
        XCTAssertEqual(sha256(ofFile: directory.file("good.bin")), Self.sha256(good))
        XCTAssertEqual(sha256(ofFile: directory.file("missing.bin")), Self.sha256(fixed))
    }

    /// A name planted at one file's destination while the group downloads (another user in a
    /// shared directory, or the user's own program): the atomic group publishes nothing, that file
    /// fails FileExists, the planted file is untouched; once it is gone, Resume publishes them all.
    func testAnAtomicGroupWithAPlantedNamePublishesNothing() async throws {
        let slow = Self.content(300_000, seed: 12), quick = Self.content(20_000, seed: 13)
        var slowRoute = Route(content: slow)
        slowRoute.bytesPerSecond = 150_000
        http.set("/slow", slowRoute)
        http.set("/quick", Route(content: quick))
        let (group, tasks) = try await startGroup(
            [(http.url("/slow"), directory.file("first.bin")), (http.url("/quick"), directory.file("second.bin"))],
            atomic: true
        )
        let planted = Array("someone else's\n".utf8)
        FileManager.default.createFile(atPath: directory.file("second.bin"), contents: Data(planted))
        try await until("GroupFailed", seconds: 30) { signalNames(for: group).contains("GroupFailed") }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("first.bin")), "nothing was published")
        XCTAssertEqual(
            FileManager.default.contents(atPath: directory.file("second.bin")).map { Array($0) }, planted, "untouched")
        let error = try await property(tasks[1], "Error")?.stringValue
        XCTAssertEqual(error, "org.example.Downloads.Error.FileExists")
        let state = try await groupProperty(group, "State")?.stringValue
        XCTAssertEqual(state, "failed")

        try FileManager.default.removeItem(atPath: directory.file("second.bin"))
        let resumed = try await gdbus("Resume", [], object: group.rawValue, interface: "org.example.Downloads.Group")
        XCTAssertEqual(resumed.status, 0, resumed.description)
        try await until("GroupFinished", seconds: 30) { signalNames(for: group).contains("GroupFinished") }
        XCTAssertEqual(sha256(ofFile: directory.file("first.bin")), Self.sha256(slow))
        XCTAssertEqual(sha256(ofFile: directory.file("second.bin")), Self.sha256(quick))
    }

    func testABadFileRefusesTheWholeGroup() async throws {
        let busctl = try await run([
            "busctl", "--address", bus.address, "call", "org.example.Downloads", "/org/example/Downloads",
            "org.example.Downloads",
            "StartGroup", "a(ssa{sv})a{sv}", "2",
            http.url("/a"), directory.file("a.bin"), "0",
            "ftp://example/b", directory.file("b.bin"), "0",
            "0",
        ])
        XCTAssertNotEqual(busctl.status, 0)
        XCTAssertTrue(busctl.stderr.contains("file 1"), busctl.stderr)
        let groups = try await call("ListGroups", [.string("")])
        XCTAssertEqual(groups.first, .objectPaths([]))
        let tasks = try await call("ListTasks", [.string("")])
        XCTAssertEqual(tasks.first, .objectPaths([]))
    }

    func testPauseAndCancelReachEveryFileOfTheGroup() async throws {
        var route = Route(content: Self.content(2_000_000, seed: 11))
        route.bytesPerSecond = 200_000
        http.set("/slow1", route)
        http.set("/slow2", route)
        let (group, tasks) = try await startGroup([
            (http.url("/slow1"), directory.file("s1.bin")), (http.url("/slow2"), directory.file("s2.bin")),
        ])
        try await waitBytes(tasks[0], atLeast: 1)
        let paused = try await gdbus("Pause", [], object: group.rawValue, interface: "org.example.Downloads.Group")
        XCTAssertEqual(paused.status, 0, paused.description)
        for task in tasks { try await waitState(task, ["paused"]) }
        let state = try await groupProperty(group, "State")?.stringValue
        XCTAssertEqual(state, "paused")
        let cancelled = try await gdbus("Cancel", [], object: group.rawValue, interface: "org.example.Downloads.Group")
        XCTAssertEqual(cancelled.status, 0, cancelled.description)
        for task in tasks { try await waitState(task, ["cancelled"]) }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix(".part")
        }
        XCTAssertEqual(leftovers, [], "a cancelled group leaves no partial file")
    }
    func groupCall(_ group: ObjectPath, _ method: String) async throws -> [DBusValue] {
        try await client.call(
            destination: "org.example.Downloads", path: group, interface: "org.example.Downloads.Group", method: method,
            arguments: []
        )
    }

    /// `Pause` gives the group's resume data, `ResumeGroupWithData` carries the same group on;
    /// killed mid-group, the restarted daemon finishes it with one `GroupFinished`.
    func testAGroupsResumeDataAndAKillMidGroup() async throws {
        let contents = (0..<3).map { Self.content(900_000, seed: UInt32(40 + $0)) }
        var routes: [Route] = []
        for (index, content) in contents.enumerated() {
            var route = Route(content: content)
            route.bytesPerSecond = 600_000
            routes.append(route)
            http.set("/g\(index)", route)
        }
        let (group, tasks) = try await startGroup(
            (0..<3).map { (http.url("/g\($0)"), directory.file("g\($0).bin")) }, atomic: true)
        try await waitBytes(tasks[0], atLeast: 1)
        let paused = try await groupCall(group, "Pause")
        let blob = try XCTUnwrap(paused.first?.bytesValue)
        XCTAssertTrue(
            blob.starts(with: Array("org.example.Downloads.GroupResumeData/1\n".utf8)),
            String(decoding: blob.prefix(80), as: UTF8.self))
        for task in tasks { try await waitState(task, ["paused"]) }

        // Refused with a reason: an altered blob, a task's blob, a url option.
        var altered = blob
        altered[blob.count / 2] ^= 1
        let taskBlob =
            try await client.call(
                destination: "org.example.Downloads", path: tasks[0], interface: "org.example.Downloads.Task",
                method: "Pause", arguments: []
            ).first?.bytesValue ?? []
        for (bad, options, name) in [
            (altered, [String: DBusValue](), "InvalidResumeData"),
            (taskBlob, [:], "InvalidResumeData"),
            (blob, ["url": .string(http.url("/g0"))], "InvalidArgument"),
        ] {
            do {
                _ = try await call("ResumeGroupWithData", [.bytes(bad), .vardict(options)])
                XCTFail("\(name) expected")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error." + name, error.message)
            }
        }

        let resumed = try await call("ResumeGroupWithData", [.bytes(blob), .vardict([:])])
        XCTAssertEqual(resumed.first?.objectPathValue, group, "the same group carries on")
        XCTAssertEqual(resumed.last, .objectPaths(tasks))
        try await waitBytes(tasks[2], atLeast: 200_000)
        killDaemon()
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: directory.file("g0.bin")),
            "nothing published before every file is complete")
        try await startDaemon()
        try await until("GroupFinished after the restart", seconds: 60) {
            signalNames(for: group).contains("GroupFinished")
        }
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("g\(index).bin")), Self.sha256(content))
        }
        XCTAssertEqual(signalNames(for: group).filter { $0 == "GroupFinished" }.count, 1)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix(".part")
        }
        XCTAssertEqual(leftovers, [])
        let finished = try await groupProperty(group, "FilesFinished")?.uint32Value
        XCTAssertEqual(finished, 3)
    }
    /// A Metalink document of several files is a group: each `<file>` a task, its name a path
    /// below the destination directory (subdirectories made); `Start` with it says to use a group.
    func testAMultiFileMetalinkIsAGroup() async throws {
        let a = Self.content(80_000, seed: 50), b = Self.content(60_000, seed: 51)
        http.set("/m/a.bin", Route(content: a))
        http.set("/m/b.bin", Route(content: b))
        func meta4(_ names: [String]) -> [UInt8] {
            let files = zip(names, [a, b]).map { name, content in
                """
                  <file name="\(name)">
                    <size>\(content.count)</size>
                    <hash type="sha-256">\(Self.sha256(content))</hash>
                    <url>\(http.url("/m/" + (name as NSString).lastPathComponent))</url>
                  </file>

                """
            }.joined()
            return Array(
                "<?xml version=\"1.0\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n\(files)</metalink>\n"
                    .utf8)
        }
        let inbox = directory.file("inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let entry = { (document: [UInt8]) in
            DBusValue.array(
                element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                [
                    .structure([.string(""), .string(inbox), .vardict(["metalink": .bytes(document)])])
                ])
        }
        let reply = try await call(
            "StartGroup", [entry(meta4(["a.bin", "sub/b.bin"])), .vardict(["atomic": .boolean(true)])])
        let group = try XCTUnwrap(reply.first?.objectPathValue)
        XCTAssertEqual(reply.last.map { if case .array(_, let paths) = $0 { return paths.count } else { return 0 } }, 2)
        try await until("GroupFinished") { signalNames(for: group).contains("GroupFinished") }
        XCTAssertEqual(sha256(ofFile: inbox + "/a.bin"), Self.sha256(a))
        XCTAssertEqual(sha256(ofFile: inbox + "/sub/b.bin"), Self.sha256(b))
        let files = try await groupProperty(group, "Files")?.uint32Value
        XCTAssertEqual(files, 2)

        for bad in [["a.bin", "../b.bin"], ["a.bin", "/etc/b.bin"]] {
            do {
                _ = try await call("StartGroup", [entry(meta4(bad)), .vardict([:])])
                XCTFail("\(bad) accepted")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
                XCTAssertTrue(error.message.contains("file 0"), error.message)
            }
        }
        // A document naming one file twice (an atomic group would publish one over the other):
        // refused at the call, and the subdirectory its names need is not made.
        do {
            _ = try await call(
                "StartGroup", [entry(meta4(["new/x.bin", "new/x.bin"])), .vardict(["atomic": .boolean(true)])])
            XCTFail("a document naming one file twice was taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
            XCTAssertTrue(error.message.contains("name the same file"), error.message)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: inbox + "/new"), "nothing was made")
        // Refused after the document's subdirectories were made (its second file is bad): the
        // call takes back the ones it made; one that was there before stays.
        let kept = inbox + "/kept"
        try FileManager.default.createDirectory(atPath: kept, withIntermediateDirectories: true)
        do {
            _ = try await call(
                "StartGroup",
                [
                    DBusValue.array(
                        element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                        [
                            .structure([
                                .string(""), .string(inbox),
                                .vardict(["metalink": .bytes(meta4(["later/deep/a.bin", "kept/b.bin"]))]),
                            ]),
                            .structure([.string("ftp://example/c"), .string(inbox + "/c.bin"), .vardict([:])]),
                        ]),
                    .vardict(["atomic": .boolean(true)]),
                ])
            XCTFail("a group with an ftp URL was taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: inbox + "/later"), "the directories it made are gone")
        var isDirectory: ObjCBool = false
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: kept, isDirectory: &isDirectory) && isDirectory.boolValue,
            "theirs stays")
        // So is a group naming one destination twice.
        do {
            _ = try await startGroup(
                [(http.url("/m/a.bin"), inbox + "/twice.bin"), (http.url("/m/b.bin"), inbox + "//twice.bin")],
                atomic: true)
            XCTFail("a group naming one destination twice was taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
            XCTAssertTrue(error.message.contains("name the same file"), error.message)
        }
        let groups = try await call("ListGroups", [.string("")])
        XCTAssertEqual(
            groups.first.map { if case .array(_, let listed) = $0 { return listed.count } else { return -1 } }, 1,
            "only the first group")
        do {
            _ = try await start("", inbox, ["metalink": .bytes(meta4(["a.bin", "b.bin"]))])
            XCTFail("Start took a document of two files")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
            XCTAssertTrue(error.message.contains("StartGroup"), error.message)
        }
    }

    /// A group counts as its files against the user's tasks: one that would pass the quota is
    /// refused whole, nothing made; one that fits starts.
    func testAGroupCountsAsItsFilesAgainstTheUsersTasks() async throws {
        stopDaemon()
        tasksPerUser = 5
        try await startDaemon()
        http.set("/q", Route(content: Self.content(1000)))
        do {
            _ = try await startGroup((0..<6).map { (http.url("/q"), directory.file("q\($0)")) })
            XCTFail("a group of 6 over a quota of 5 started")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.QuotaExceeded", error.message)
            XCTAssertTrue(error.message.contains("5 tasks"), error.message)
        }
        let tasks = try await call("ListTasks", [.string("")])
        XCTAssertEqual(tasks.first, .objectPaths([]), "nothing was made")
        let (group, files) = try await startGroup((0..<5).map { (http.url("/q"), directory.file("q\($0)")) })
        XCTAssertEqual(files.count, 5)
        try await until("GroupFinished") { signalNames(for: group).contains("GroupFinished") }
        do {
            _ = try await start(http.url("/q"), directory.file("one-more"))
            XCTFail("a sixth task started")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.QuotaExceeded", error.message)
        }
    }
}
