@testable import DownloadEngine
@testable import DownloadModel
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Groups in the engine: many files as one job; an atomic group publishes all or nothing, and a
/// restart finishes a publication the decision was recorded for.
final class GroupTests: EngineTestCase {
    func request(_ path: String, _ name: String) -> DownloadRequest {
        DownloadRequest(
            owner: Self.owner, session: "s", url: server.url(path), destination: directory.file(name),
            destinationIsDirectory: false
        )
    }

    func makeGroup(_ files: [(String, String)], atomic: Bool) throws -> (DownloadGroupRecord, [TaskSnapshot]) {
        try manager.createGroup(
            files.map { request($0.0, $0.1) }, owner: Self.owner, app: "", session: "s", title: "assets",
            atomic: atomic, taskSignals: false
        )
    }

    /// Waits (bounded) until task `id` holds `bytes` durably.
    func waitForDurable(_ id: UInt64, _ bytes: Int64) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while manager.snapshot(id)?.durableOffset != bytes, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual(manager.snapshot(id)?.durableOffset, bytes, "task \(id) did not hold \(bytes) bytes durably")
    }

    func testAGroupRunsItsFilesAndPublishesEachAsItEnds() async throws {
        let contents = (1...3).map { Self.content(50_000 * $0, seed: UInt32($0)) }
        for (index, content) in contents.enumerated() { server.set("/f\(index)", Route(content: content)) }
        let (group, tasks) = try makeGroup((0..<3).map { ("/f\($0)", "f\($0).bin") }, atomic: false)
        XCTAssertEqual(tasks.map(\.record.group), [group.id, group.id, group.id])
        for task in tasks { try await wait(task.id, for: [.finished]) }
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("f\(index).bin")), Self.sha256(content))
        }
        XCTAssertEqual(manager.groupTasks(group.id).map(\.id), tasks.map(\.id))
        XCTAssertEqual(manager.groups(owner: Self.owner).map(\.id), [group.id])
        XCTAssertFalse(
            observer.all.contains(.groupPublishing(group.id)), "a group that is not atomic records no publication")
    }

    func testAnAtomicGroupPublishesNothingUntilEveryFileIsComplete() async throws {
        let fast = Self.content(60_000, seed: 1)
        let slow = Self.content(400_000, seed: 2)
        server.set("/fast", Route(content: fast))
        var route = Route(content: slow)
        route.bytesPerSecond = 200_000
        server.set("/slow", route)
        let (group, tasks) = try makeGroup([("/fast", "fast.bin"), ("/slow", "slow.bin")], atomic: true)
        // The fast file is complete and durable, and waits: not in place yet.
        try await waitForDurable(tasks[0].id, 60_000)
        XCTAssertEqual(manager.snapshot(tasks[0].id)?.state, .running)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("fast.bin")))
        XCTAssertEqual(sha256(ofFile: tasks[0].record.partialPath), Self.sha256(fast))
        for task in tasks { try await wait(task.id, for: [.finished]) }
        XCTAssertEqual(sha256(ofFile: directory.file("fast.bin")), Self.sha256(fast))
        XCTAssertEqual(sha256(ofFile: directory.file("slow.bin")), Self.sha256(slow))
        XCTAssertEqual(leftovers(), [])
        // The decision was recorded once, before either file was published.
        let events = observer.all
        XCTAssertEqual(events.filter { $0 == .groupPublishing(group.id) }.count, 1)
        let decided = try XCTUnwrap(events.firstIndex(of: .groupPublishing(group.id)))
        let firstFinished = try XCTUnwrap(
            events.firstIndex { if case .finished = $0 { return true } else { return false } })
        XCTAssertLessThan(decided, firstFinished)
    }

    func testAnAtomicGroupWhoseFileFailsPublishesNothingAndResumesWhole() async throws {
        let good = Self.content(80_000, seed: 3)
        let late = Self.content(70_000, seed: 4)
        server.set("/good", Route(content: good))
        // The file that fails begins later, so the good one is complete and waiting by then.
        var late404 = request("/late", "late.bin")
        late404.options.earliestBegin = WallClock.now + 2
        let (group, tasks) = try manager.createGroup(
            [request("/good", "good.bin"), late404], owner: Self.owner, app: "", session: "s", title: "", atomic: true,
            taskSignals: false
        )
        try await waitForDurable(tasks[0].id, 80_000)
        XCTAssertEqual(manager.snapshot(tasks[0].id)?.state, .running, "complete, waiting for the other file")
        try await wait(tasks[1].id, for: [.failed], seconds: 20)
        // The other file stops with its bytes kept; nothing is published.
        try await wait(tasks[0].id, for: [.paused])
        XCTAssertEqual(manager.snapshot(tasks[0].id)?.durableOffset, 80_000)
        XCTAssertEqual(sha256(ofFile: tasks[0].record.partialPath), Self.sha256(good))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("good.bin")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("late.bin")))
        XCTAssertFalse(observer.all.contains(.groupPublishing(group.id)))

        // The server is fixed: the group resumes, and both files are published together.
        server.set("/late", Route(content: late))
        try manager.resumeGroup(group.id)
        for task in tasks { try await wait(task.id, for: [.finished]) }
        XCTAssertEqual(sha256(ofFile: directory.file("good.bin")), Self.sha256(good))
        XCTAssertEqual(sha256(ofFile: directory.file("late.bin")), Self.sha256(late))
        XCTAssertEqual(leftovers(), [])
    }

    /// Another user plants the last file's name after the names were checked and before its
    /// rename: the files placed go back to their partial names, the decision is undone, the
    /// file whose name is taken fails `FileExists` and the others stop; nothing is published.
    /// With the name free again, the group resumes and publishes all of them.
    func testANamePlantedDuringThePublicationPutsThePlacedFilesBack() async throws {
        await manager.shutdown()
        let third = directory.file("c.bin")
        var configuration = SessionManager.Configuration()
        configuration.checkpointBytes = 64 * 1024
        manager = SessionManager(
            configuration: configuration, resumeDataKey: key, files: PlantingFileAccess(plantAt: third),
            delegate: EventDelivery(observers: [observer])
        )
        let contents = (0..<3).map { Self.content(40_000 + 1_000 * $0, seed: UInt32(30 + $0)) }
        for (index, name) in ["a", "b", "c"].enumerated() { server.set("/\(name)", Route(content: contents[index])) }
        let (group, tasks) = try makeGroup([("/a", "a.bin"), ("/b", "b.bin"), ("/c", "c.bin")], atomic: true)
        try await wait(tasks[2].id, for: [.failed], seconds: 20)
        XCTAssertTrue(
            observer.all.contains(.failed(tasks[2].id, "FileExists", true)),
            "\(observer.all.filter { if case .failed = $0 { true } else { false } })")
        for task in tasks.prefix(2) { try await wait(task.id, for: [.paused]) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("a.bin")), "a placed file went back")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("b.bin")), "a placed file went back")
        XCTAssertEqual(
            FileManager.default.contents(atPath: third).map { Array($0) }, PlantingFileAccess.plantedBytes,
            "theirs untouched")
        for (index, task) in tasks.enumerated() {
            XCTAssertEqual(
                sha256(ofFile: task.record.partialPath), Self.sha256(contents[index]), "file \(index) kept whole")
        }
        XCTAssertEqual(
            observer.all.filter { $0 == .groupPublishing(group.id) || $0 == .groupNotPublished(group.id) },
            [
                .groupPublishing(group.id), .groupNotPublished(group.id),
            ])
        XCTAssertEqual(manager.group(group.id)?.publishing, false)

        try FileManager.default.removeItem(atPath: third)
        try manager.resumeGroup(group.id)
        for task in tasks { try await wait(task.id, for: [.finished]) }
        for (index, name) in ["a", "b", "c"].enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("\(name).bin")), Self.sha256(contents[index]))
        }
        XCTAssertEqual(leftovers(), [])
    }

    /// After a crash between the recorded decision and the last rename: a file renamed before the
    /// crash is found in place, the other is published, each exactly once.
    func testARestartFinishesAPublicationTheDecisionWasRecordedFor() async throws {
        let first = Self.content(90_000, seed: 5)
        let second = Self.content(50_000, seed: 6)
        server.set("/one", Route(content: first))
        var route = Route(content: second)
        route.bytesPerSecond = 100_000
        server.set("/two", route)
        let (group, tasks) = try makeGroup([("/one", "one.bin"), ("/two", "two.bin")], atomic: true)
        try await waitForDurable(tasks[0].id, 90_000)
        // The daemon stops; as it would be found after a crash whose decision was committed and
        // whose first rename was made: the group publishing, one.bin in place, two.bin partial.
        await manager.shutdown()
        let records = manager.snapshots().map(\.record)
        XCTAssertEqual(records.map(\.state), [.queued, .queued])
        try FileManager.default.moveItem(atPath: records[0].partialPath, toPath: directory.file("one.bin"))
        var decided = group
        decided.publishing = true

        observer = RecordingObserver()
        manager = makeManager()
        manager.restore(groups: [decided])
        manager.restore(records, nextID: 3)
        for task in tasks { try await wait(task.id, for: [.finished]) }
        XCTAssertEqual(sha256(ofFile: directory.file("one.bin")), Self.sha256(first))
        XCTAssertEqual(sha256(ofFile: directory.file("two.bin")), Self.sha256(second))
        XCTAssertEqual(manager.snapshot(tasks[0].id)?.record.resolvedPath, directory.file("one.bin"))
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertEqual(names, ["one.bin", "two.bin"], "each file in place exactly once, nothing left")
        XCTAssertEqual(
            server.requests(for: "/one").count, 1, "a file published before the crash is not asked for again")
    }

    /// A paused atomic group's resume data: given back while the group exists it resumes that
    /// group; given to a daemon that lost it, a new group takes over the partial files (the
    /// complete one is not asked for again) and publishes all of them together.
    func testAGroupsResumeDataResumesItOrANewGroupTakesItsFilesOver() async throws {
        let done = Self.content(70_000, seed: 7)
        let big = Self.content(600_000, seed: 8)
        server.set("/done", Route(content: done))
        var slow = Route(content: big)
        slow.bytesPerSecond = 300_000
        server.set("/big", slow)
        let (group, tasks) = try makeGroup([("/done", "done.bin"), ("/big", "big.bin")], atomic: true)
        try await waitForDurable(tasks[0].id, 70_000)
        let deadline = ContinuousClock.now + .seconds(20)
        while (manager.snapshot(tasks[1].id)?.durableOffset ?? 0) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await manager.pauseGroup(group.id)
        let blob = try manager.groupResumeData(group.id)
        XCTAssertTrue(blob.starts(with: Array("org.example.Downloads.GroupResumeData/1\n".utf8)))
        // Forged, another user's, a task's blob: refused with a reason.
        var altered = blob
        altered[60] ^= 1
        XCTAssertThrowsError(try manager.decodeGroupResumeData(altered, owner: Self.owner))
        XCTAssertThrowsError(try manager.decodeGroupResumeData(blob, owner: Self.owner + 1))
        XCTAssertThrowsError(
            try manager.decodeGroupResumeData(try manager.resumeData(for: tasks[0].id), owner: Self.owner)
        ) {
            XCTAssertTrue(($0 as? DownloadError)?.message.contains("ResumeWithData") == true, "\($0)")
        }
        let data = try manager.decodeGroupResumeData(blob, owner: Self.owner)
        XCTAssertEqual(data.files.map(\.taskID), tasks.map(\.id))
        XCTAssertEqual(data.files[0].offset, 70_000)
        XCTAssertTrue(data.group.atomic)

        // The daemon lost the group (a new state, the same key): a new group takes the files over.
        await manager.shutdown()
        observer = RecordingObserver()
        manager = makeManager()
        let (adopted, files) = try await manager.adoptGroup(data, change: DownloadOptions.Change())
        XCTAssertNotEqual(files.map(\.id), tasks.map(\.id))
        XCTAssertEqual(files.first?.record.durableOffset, 70_000, "the complete file's partial is taken over")
        XCTAssertEqual(files.map(\.record.group), [adopted.id, adopted.id])
        XCTAssertTrue(adopted.atomic)
        for file in files { try await wait(file.id, for: [.finished]) }
        XCTAssertEqual(sha256(ofFile: directory.file("done.bin")), Self.sha256(done))
        XCTAssertEqual(sha256(ofFile: directory.file("big.bin")), Self.sha256(big))
        XCTAssertEqual(leftovers(), [])
        let sent = server.requests(for: "/done").map(\.bodyBytesSent).reduce(0, +)
        XCTAssertEqual(
            sent, 70_000, "the complete file's bytes were taken over (a range asked, 416), not fetched again")
        XCTAssertEqual(observer.all.filter { $0 == .groupPublishing(adopted.id) }.count, 1)
        XCTAssertThrowsError(try manager.groupResumeData(adopted.id), "a finished group has nothing to resume")
    }

    /// `parallel` 2: never more than two files of the group run; its bandwidth is split
    /// between the files running (each paced to its share).
    func testAGroupsParallelAndBandwidthAreSharedByItsFiles() async throws {
        let contents = (0..<4).map { Self.content(150_000, seed: UInt32(80 + $0)) }
        for (index, content) in contents.enumerated() { server.set("/p\(index)", Route(content: content)) }
        let (group, tasks) = try manager.createGroup(
            (0..<4).map { request("/p\($0)", "p\($0).bin") }, owner: Self.owner, app: "", session: "s", title: "",
            atomic: false,
            taskSignals: false, parallel: 2, maxBytesPerSecond: 400_000
        )
        var most = 0
        var shares = Set<UInt64>()
        let deadline = ContinuousClock.now + .seconds(30)
        while manager.groupTasks(group.id).contains(where: { $0.state != .finished }), ContinuousClock.now < deadline {
            let running = manager.groupTasks(group.id).filter { $0.state == .running }
            most = max(most, running.count)
            if running.count == 2 {
                for task in running { shares.insert(try manager.task(task.id).withState { $0.limit }.bytesPerSecond) }
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        for task in tasks { try await wait(task.id, for: [.finished]) }
        XCTAssertEqual(most, 2, "at most two files at once, and two did run together")
        XCTAssertTrue(shares.contains(200_000), "two running files each get half the group's 400,000 B/s: \(shares)")
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("p\(index).bin")), Self.sha256(content))
        }
    }

    func testAGroupNeedsFilesAndEveryFileIsChecked() throws {
        XCTAssertThrowsError(
            try manager.createGroup(
                [], owner: Self.owner, app: "", session: "s", title: "", atomic: false, taskSignals: false))
        var bad = request("/x", "x.bin")
        bad.options.connections = 0
        XCTAssertThrowsError(
            try manager.createGroup(
                [request("/y", "y.bin"), bad], owner: Self.owner, app: "", session: "s", title: "", atomic: false,
                taskSignals: false
            ))
        XCTAssertEqual(manager.snapshots().count, 0, "a refused group makes no task")
        XCTAssertEqual(manager.groups(owner: Self.owner).count, 0)
    }
}
