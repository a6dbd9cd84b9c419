import DBus
import DownloadsAPI
import DownloadsClient
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// DownloadsClient against the real daemon on a private bus.
final class DownloadsClientTests: DaemonTestCase {
    /// Writes down every delegate call, in order.
    final class Recorder: DownloadSessionDelegate {
        let calls = NIOLockedValueBox([String]())
        let progress = NIOLockedValueBox([Int64]())

        func downloadSession(
            _ session: DownloadSession, downloadTask: BackgroundDownloadTask, didWriteData bytesWritten: Int64,
            totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
        ) {
            progress.withLockedValue { $0.append(totalBytesWritten) }
            calls.withLockedValue {
                if $0.last != "write \(downloadTask.taskIdentifier ?? 0)" {
                    $0.append("write \(downloadTask.taskIdentifier ?? 0)")
                }
            }
        }

        func downloadSession(
            _ session: DownloadSession, downloadTask: BackgroundDownloadTask, didFinishDownloadingTo location: String
        ) {
            calls.withLockedValue { $0.append("finish \(downloadTask.taskIdentifier ?? 0) \(location)") }
        }

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didCompleteWithError error: DownloadsClientError?
        ) {
            calls.withLockedValue { $0.append("complete \(task.taskIdentifier ?? 0) \(error?.shortName ?? "ok")") }
        }

        func downloadSessionDidFinishEvents(forBackgroundSession session: DownloadSession) {
            calls.withLockedValue { $0.append("events \(session.configuration.identifier)") }
        }

        func downloadSession(
            _ session: DownloadSession, group: BackgroundDownloadGroup, didWriteData bytesWritten: Int64,
            bytesExpected: Int64,
            filesFinished: UInt32, files: UInt32
        ) {
            calls.withLockedValue {
                if $0.last != "group progress \(group.identifier)" { $0.append("group progress \(group.identifier)") }
            }
            if filesFinished == files {
                calls.withLockedValue { $0.append("group files \(filesFinished) of \(files)") }
            }
        }

        func downloadSession(
            _ session: DownloadSession, group: BackgroundDownloadGroup,
            didCompleteWithError error: DownloadsClientError?
        ) {
            calls.withLockedValue { $0.append("group complete \(group.identifier) \(error?.shortName ?? "ok")") }
        }

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didSendBodyData bytesSent: Int64,
            totalBytesSent: Int64,
            totalBytesExpectedToSend: Int64
        ) {
            progress.withLockedValue { $0.append(totalBytesSent) }
            calls.withLockedValue {
                if $0.last != "send \(task.taskIdentifier ?? 0)" { $0.append("send \(task.taskIdentifier ?? 0)") }
            }
        }

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didReceive response: UploadResponse
        ) {
            calls.withLockedValue {
                $0.append(
                    "response \(task.taskIdentifier ?? 0) \(response.statusCode) \(response.headers["location"] ?? "")")
            }
        }

        func downloadSession(_ session: DownloadSession, task: BackgroundDownloadTask, didReceive data: Data) {
            calls.withLockedValue {
                $0.append("data \(task.taskIdentifier ?? 0) \(String(decoding: data, as: UTF8.self))")
            }
        }

        var all: [String] { calls.withLockedValue { $0 } }
    }

    func session(
        _ identifier: String, delegate: Recorder? = nil, handlesEvents: Bool = true
    ) async throws -> DownloadSession {
        var configuration = DownloadSession.Configuration.background(identifier: identifier)
        configuration.bus = .address(bus.address)
        configuration.handlesEvents = handlesEvents
        return try await DownloadSession(configuration: configuration, delegate: delegate)
    }

    func waitUntil(seconds: Double = 30, _ condition: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline && !condition() { try await Task.sleep(for: .milliseconds(20)) }
    }

    func testDelegateSeesProgressThenFinishThenEventsFinished() async throws {
        let content = Self.content(1_500_000)
        var route = Route(content: content)
        route.bytesPerSecond = 3_000_000
        http.set("/f", route)
        let recorder = Recorder()
        let session = try await session("app", delegate: recorder)
        defer { session.invalidate() }
        let task = session.downloadTask(with: try XCTUnwrap(URL(string: http.url("/f"))), to: directory.file("f.bin"))
        XCTAssertNil(task.taskIdentifier, "suspended until resume()")
        try await task.resume()
        let id = try XCTUnwrap(task.taskIdentifier)
        try await waitUntil { recorder.all.contains("events app") }
        XCTAssertEqual(
            recorder.all,
            [
                "write \(id)", "finish \(id) \(directory.file("f.bin"))", "complete \(id) ok", "events app",
            ])
        XCTAssertEqual(recorder.progress.withLockedValue { $0.last }, Int64(content.count))
        XCTAssertEqual(sha256(ofFile: directory.file("f.bin")), Self.sha256(content))
        let status = try await task.status()
        XCTAssertEqual(status.state, "finished")
        XCTAssertEqual(status.session, "app")
    }

    /// `downloadGroup`: one call, the group's progress and its end reach the delegate (no task
    /// events: the group sends none of its files'), then the session's end; pause gives resume
    /// data that resumes the group from a new session.
    func testADownloadGroupReportsItsProgressAndEnd() async throws {
        let contents = (0..<3).map { Self.content(100_000 + $0, seed: UInt32(90 + $0)) }
        for (index, content) in contents.enumerated() { http.set("/grp\(index)", Route(content: content)) }
        let recorder = Recorder()
        let session = try await session("assets", delegate: recorder)
        defer { session.invalidate() }
        let group = try await session.downloadGroup(
            contents.indices.map {
                DownloadGroupFile(url: http.url("/grp\($0)"), destination: directory.file("grp\($0).bin"))
            },
            options: {
                var options = TaskOptions(); options.title = "assets"; return options
            }(),
            group: DownloadsProxy.GroupOptions(atomic: true)
        )
        XCTAssertEqual(group.tasks.count, 3)
        try await waitUntil { recorder.all.contains("events assets") }
        let id = group.identifier
        XCTAssertEqual(
            recorder.all.filter { !$0.hasPrefix("group progress") },
            [
                "group files 3 of 3", "group complete \(id) ok", "events assets",
            ])
        XCTAssertFalse(recorder.all.contains { $0.hasPrefix("write") || $0.hasPrefix("finish") }, "\(recorder.all)")
        for (index, content) in contents.enumerated() {
            XCTAssertEqual(sha256(ofFile: directory.file("grp\(index).bin")), Self.sha256(content))
        }
        let status = try await group.status()
        XCTAssertEqual(status.state, "finished")
        XCTAssertEqual(status.title, "assets")
        XCTAssertEqual(status.filesFinished, 3)
        let groups = try await session.allGroups()
        XCTAssertEqual(groups, [group])

        // Paused mid-way: its resume data carries it on from another session object.
        var slow = Route(content: Self.content(1_000_000, seed: 95))
        slow.bytesPerSecond = 300_000
        http.set("/slowgrp", slow)
        let second = try await session.downloadGroup([
            DownloadGroupFile(url: http.url("/slowgrp"), destination: directory.file("slow.bin"))
        ])
        let slowTask = try XCTUnwrap(second.tasks.first?.objectPath)
        try await waitBytes(slowTask, atLeast: 1)
        let data = try await second.pause()
        let later = try await self.session("assets", handlesEvents: false)
        defer { later.invalidate() }
        let resumed = try await later.downloadGroup(withResumeData: data)
        XCTAssertEqual(resumed.path, second.path)
        _ = try await waitState(slowTask, ["finished"])
    }

    func testAMetalinkDocumentIsATaskOfItsOwn() async throws {
        let content = Self.content(600_000, seed: 3)
        http.set("/m.iso", Route(content: content))
        let document = """
            <?xml version="1.0"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="m.iso">
              <hash type="sha-256">\(Self.sha256(content))</hash>
              <url priority="1">\(http.url("/m.iso"))</url>
            </file></metalink>
            """
        let recorder = Recorder()
        let session = try await session("meta", delegate: recorder)
        defer { session.invalidate() }
        let task = session.downloadTask(withMetalink: Data(document.utf8), to: directory.file("m.iso"))
        try await task.resume()
        let id = try XCTUnwrap(task.taskIdentifier)
        try await waitUntil { recorder.all.contains("complete \(id) ok") }
        XCTAssertTrue(recorder.all.contains("finish \(id) \(directory.file("m.iso"))"), "\(recorder.all)")
        XCTAssertEqual(sha256(ofFile: directory.file("m.iso")), Self.sha256(content))
        let status = try await task.status()
        XCTAssertEqual(status.url, http.url("/m.iso"), "the document's URL is the task's")
    }

    func testADiscretionarySessionStartsBackgroundTasks() async throws {
        http.set("/d", Route(content: Self.content(20_000)))
        var configuration = DownloadSession.Configuration.background(identifier: "updates")
        configuration.bus = .address(bus.address)
        configuration.isDiscretionary = true
        let session = try await DownloadSession(configuration: configuration)
        defer { session.invalidate() }
        let task = session.downloadTask(with: try XCTUnwrap(URL(string: http.url("/d"))), to: directory.file("d.bin"))
        try await task.resume()
        var options = TaskOptions()
        options.background = false
        let ordinary = session.downloadTask(
            with: try XCTUnwrap(URL(string: http.url("/d"))), to: directory.file("e.bin"), options: options)
        try await ordinary.resume()
        let status = try await task.status()
        XCTAssertTrue(status.background, "isDiscretionary: the session's tasks use only spare bandwidth")
        let other = try await ordinary.status()
        XCTAssertFalse(other.background, "unless a task's options say otherwise")
    }

    /// An app that restarts finds its tasks again with the title, description and metadata it
    /// gave them (URLSession's `taskDescription`), and by its metadata.
    func testTasksCarryTheirDescriptionAndAreFoundByMetadata() async throws {
        http.set("/a", Route(content: Self.content(1000, seed: 3)))
        http.set("/b", Route(content: Self.content(1000, seed: 4)))
        let first = try await session("podcasts", handlesEvents: false)
        var options = TaskOptions()
        options.title = "Episode 1"
        options.taskDescription = "feed item 1"
        options.metadata = ["item": .uint32(1)]
        let one = first.downloadTask(
            with: try XCTUnwrap(URL(string: http.url("/a"))), to: directory.file("a"), options: options)
        XCTAssertEqual(one.taskDescription, "feed item 1", "known before it starts, as URLSession's")
        try await one.resume()
        options.title = "Episode 2"
        options.taskDescription = "feed item 2"
        options.metadata = ["item": .uint32(2)]
        let two = first.downloadTask(
            with: try XCTUnwrap(URL(string: http.url("/b"))), to: directory.file("b"), options: options)
        try await two.resume()
        first.invalidate()

        let again = try await session("podcasts", handlesEvents: false)
        defer { again.invalidate() }
        let tasks = try await again.allTasks().sorted { ($0.taskIdentifier ?? 0) < ($1.taskIdentifier ?? 0) }
        XCTAssertEqual(tasks.map(\.taskDescription), ["feed item 1", "feed item 2"])
        XCTAssertEqual(tasks.map(\.title), ["Episode 1", "Episode 2"])
        let found = try await again.tasks(matching: ["item": .uint32(2)])
        XCTAssertEqual(found.map(\.objectPath), [two.objectPath])
        XCTAssertEqual(found.first?.metadata, ["item": .uint32(2)])
        let status = try await found[0].status()
        XCTAssertEqual(status.displayName, "Episode 2")
    }

    func testPauseGivesResumeDataThatResumesInANewSession() async throws {
        let content = Self.content(2_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        http.set("/slow", route)
        let first = try await session("resumable", handlesEvents: false)
        let task = first.downloadTask(
            with: try XCTUnwrap(URL(string: http.url("/slow"))), to: directory.file("slow.bin"))
        try await task.resume()
        try await waitBytes(try XCTUnwrap(task.objectPath), atLeast: 200_000)
        let data = try await task.pause()
        XCTAssertFalse(data.isEmpty)
        _ = try await task.cancel()  // the task goes; its partial file is adopted through the data
        first.invalidate()
        // A new process: same identifier, the data from disk.
        let recorder = Recorder()
        let second = try await session("resumable", delegate: recorder)
        defer { second.invalidate() }
        let resumed = second.downloadTask(withResumeData: data)
        try await resumed.resume()
        let id = try XCTUnwrap(resumed.taskIdentifier)
        XCTAssertNotEqual(id, task.taskIdentifier, "a new task took over")
        try await waitUntil { recorder.all.contains("complete \(id) ok") }
        XCTAssertEqual(sha256(ofFile: directory.file("slow.bin")), Self.sha256(content))
        XCTAssertLessThan(http.requests(for: "/slow").count, 3)
    }

    func testANewSessionFindsTheServicesTasks() async throws {
        var route = Route(content: Self.content(3_000_000))
        route.bytesPerSecond = 1_000_000
        http.set("/long", route)
        let first = try await session("keep", handlesEvents: false)
        let task = first.downloadTask(
            with: try XCTUnwrap(URL(string: http.url("/long"))), to: directory.file("long.bin"))
        try await task.resume()
        first.invalidate()  // the app exits; the download goes on
        let recorder = Recorder()
        let second = try await session("keep", delegate: recorder)
        defer { second.invalidate() }
        let tasks = try await second.allTasks()
        XCTAssertEqual(tasks.map(\.taskIdentifier), [task.taskIdentifier])
        let other = try await session("other", handlesEvents: false)
        let otherTasks = try await other.allTasks()
        XCTAssertEqual(otherTasks.count, 0, "sessions are apart")
        other.invalidate()
        let id = try XCTUnwrap(task.taskIdentifier)
        try await waitUntil { recorder.all.contains("events keep") }
        XCTAssertEqual(
            recorder.all.filter { !$0.hasPrefix("write") },
            [
                "finish \(id) \(directory.file("long.bin"))", "complete \(id) ok", "events keep",
            ], "events of a task started by an earlier process reach the new one")
    }

    func testServiceErrorsAreTyped() async throws {
        let session = try await session("errors", handlesEvents: false)
        defer { session.invalidate() }
        let task = session.downloadTask(with: try XCTUnwrap(URL(string: "ftp://127.0.0.1/x")), to: directory.file("x"))
        do {
            try await task.resume()
            XCTFail("an ftp URL is refused")
        } catch let error as DownloadsClientError {
            XCTAssertEqual(error.code, .invalidArgument)
            XCTAssertTrue(error.message.contains("ftp"), error.message)
        }
        var notFound = Route(content: [])
        notFound.failFirst = (count: 10, status: 404, retryAfter: nil)
        http.set("/missing", notFound)
        let recorder = Recorder()
        let watched = try await self.session("errors2", delegate: recorder, handlesEvents: false)
        defer { watched.invalidate() }
        let missing = watched.downloadTask(
            with: try XCTUnwrap(URL(string: http.url("/missing"))), to: directory.file("m"))
        try await missing.resume()
        try await waitUntil { recorder.all.contains { $0.hasPrefix("complete") } }
        XCTAssertEqual(
            recorder.all.filter { $0.hasPrefix("complete") }, ["complete \(missing.taskIdentifier ?? 0) HTTPError"])
        do {
            _ = try await missing.pause()
            XCTFail("a failed task cannot be paused")
        } catch let error as DownloadsClientError {
            XCTAssertEqual(error.code, .wrongState)
        }
    }
}
