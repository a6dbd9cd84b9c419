import DownloadEngine
import DownloadModel
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Every transfer rule against the misbehaving server; bytes on disk are checked by SHA-256.
final class TransferTests: EngineTestCase {
    func testDownloadsAFileWithEventsInOrder() async throws {
        let content = Self.content(300_000)
        server.set("/f", Route(content: content))
        let id = try start("/f")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        XCTAssertEqual(observer.states(id), [.running, .finished])
        let events = observer.all.filter {
            switch $0 {
            case .progress(id, _), .response(id, _), .finished(id, _): return true
            default: return false
            }
        }
        XCTAssertEqual(events.first, .response(id, 200))
        XCTAssertEqual(events.last, .finished(id, directory.file("out\(id)")))
        let progress = events.compactMap { if case .progress(_, let n) = $0 { return n } else { return nil } }
        XCTAssertEqual(progress, progress.sorted())
        XCTAssertEqual(progress.last, Int64(content.count))
        XCTAssertEqual(server.requests(for: "/f").first?.acceptEncoding, "identity")
        let idle = RecordingObserver.Event.sessionIdle(SessionID(owner: Self.owner, name: "s"))
        try await waitForEvent { $0 == idle }
        XCTAssertEqual(observer.all.last, idle, "the session's end comes after the task's last event")
        XCTAssertEqual(leftovers(), [])
    }

    func testProgressIsCoalescedInTimeAndNeverFollowsTheEnd() async throws {
        // 32 MB as fast as the loop allows: hundreds of body parts, but progress reaches the
        // observers at most every `progressInterval`, and the last of it comes before Finished.
        // (Every other event delivers the progress before it: no checkpoints here to add some.)
        await manager.shutdown()
        manager = makeManager { $0.checkpointBytes = 1 << 40 }
        let content = Self.content(32_000_000)
        server.set("/fast", Route(content: content))
        let started = Date()
        let id = try start("/fast")
        let done = try await wait(id, for: [.finished, .failed])
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        let events = observer.all.filter {
            switch $0 {
            case .progress(id, _), .finished(id, _): return true
            default: return false
            }
        }
        let progress = events.compactMap { if case .progress(_, let n) = $0 { return n } else { return nil } }
        XCTAssertEqual(events.last, .finished(id, directory.file("out\(id)")))
        XCTAssertEqual(progress.last, Int64(content.count), "the last delivery carries every byte")
        XCTAssertEqual(progress, progress.sorted())
        let interval = SessionManager.Configuration().progressInterval
        XCTAssertLessThanOrEqual(Double(progress.count), seconds / interval + 2, "at most one delivery per interval")
    }

    func testDirectoryDestinationTakesASanitisedServerName() async throws {
        var route = Route(content: Self.content(1000))
        route.contentDisposition = #"attachment; filename="../../etc/.evil.txt""#
        server.set("/a", route)
        var second = Route(content: Self.content(10))
        second.contentDisposition = "attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf; filename=\"fallback.pdf\""
        server.set("/b", second)
        server.set("/c/file%20name.iso", Route(content: Self.content(5)))
        let a = try start("/a", destination: directory.path, isDirectory: true)
        let b = try start("/b", destination: directory.path, isDirectory: true)
        let c = try start("/c/file%20name.iso", destination: directory.path, isDirectory: true)
        let c2 = try start("/c/file%20name.iso", destination: directory.path, isDirectory: true)
        for id in [a, b, c, c2] { try await wait(id, for: [.finished, .failed]) }
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        XCTAssertTrue(names.contains("_.._etc_.evil.txt"), "\(names)")
        XCTAssertTrue(names.contains("résumé.pdf"), "\(names)")
        XCTAssertTrue(names.contains("file name.iso") && names.contains("file name (1).iso"), "\(names)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/.evil.txt"))
    }

    func testPauseGivesResumeDataAndResumeUsesRangeWithIfRange() async throws {
        let content = Self.content(1_000_000)
        var route = Route(content: content)
        route.bytesPerSecond = 2_000_000
        server.set("/slow", route)
        let id = try start("/slow")
        try await waitForBytes(id, atLeast: 200_000)
        let blob = try await manager.pause(id)
        let data = try manager.decodeResumeData(blob, owner: Self.owner)
        XCTAssertGreaterThan(data.offset, 0)
        XCTAssertEqual(data.validator, "\"v1\"")
        XCTAssertEqual(data.expectedLength, Int64(content.count))
        XCTAssertEqual(manager.snapshot(id)?.state, .paused)
        let again = try await manager.pause(id)
        XCTAssertEqual(again, blob, "pausing a paused task returns the same resume data")
        let text = String(decoding: blob, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("org.example.Downloads.ResumeData/3\n{"), text)
        XCTAssertTrue(text.contains(#""url":"\#(server.url("/slow"))""#), text)
        server.update("/slow") { $0.bytesPerSecond = nil }
        try manager.resume(id)
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        let second = try XCTUnwrap(server.requests(for: "/slow").last)
        XCTAssertEqual(second.range, "bytes=\(data.offset)-")
        XCTAssertEqual(second.ifRange, "\"v1\"")
        XCTAssertEqual(second.status, 206)
        XCTAssertEqual(observer.states(id), [.running, .paused, .queued, .running, .finished])
        XCTAssertThrowsError(try manager.resumeData(for: id)) { error in
            XCTAssertEqual((error as? DownloadError)?.code, .wrongState)
            XCTAssertEqual(
                (error as? DownloadError)?.message,
                "task \(id) is finished; only a paused, failed or queued task has resume data")
        }
    }

    func testChangedContentRestartsFromZeroAndNeverSplices() async throws {
        let old = Self.content(600_000, seed: 1)
        let new = Self.content(500_000, seed: 2)
        var route = Route(content: old)
        route.bytesPerSecond = 2_000_000
        server.set("/c", route)
        let id = try start("/c")
        try await waitForBytes(id, atLeast: 100_000)
        _ = try await manager.pause(id)
        server.update("/c") { route in
            route.content = new
            route.etag = "\"v2\""
            route.bytesPerSecond = nil
        }
        try manager.resume(id)
        try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(new))
        XCTAssertEqual(server.requests(for: "/c").last?.status, 200, "If-Range did not match: whole new file")
    }

    func testWeakETagIsNoValidatorSoResumeStartsOver() async throws {
        let content = Self.content(400_000)
        var route = Route(content: content)
        route.etag = "W/\"weak\""
        route.bytesPerSecond = 2_000_000
        server.set("/w", route)
        let id = try start("/w")
        try await waitForBytes(id, atLeast: 100_000)
        _ = try await manager.pause(id)
        server.update("/w") { $0.bytesPerSecond = nil }
        try manager.resume(id)
        try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        XCTAssertNil(server.requests(for: "/w").last?.range, "no Range without a strong validator")
    }

    func testStrongLastModifiedIsUsedForIfRange() async throws {
        let content = Self.content(400_000)
        var route = Route(content: content)
        route.etag = nil
        route.lastModified = Date(timeIntervalSince1970: 1_700_000_000)
        route.bytesPerSecond = 2_000_000
        server.set("/lm", route)
        let id = try start("/lm")
        try await waitForBytes(id, atLeast: 100_000)
        _ = try await manager.pause(id)
        server.update("/lm") { $0.bytesPerSecond = nil }
        try manager.resume(id)
        try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        let last = try XCTUnwrap(server.requests(for: "/lm").last)
        XCTAssertEqual(last.ifRange, "Tue, 14 Nov 2023 22:13:20 GMT")
        XCTAssertEqual(last.status, 206)
    }

    func testMismatchedOrMalformedContentRangeRestarts() async throws {
        for (path, override) in [("/mismatch", "bytes 0-99/400000"), ("/malformed", "bytes garbage")] {
            let content = Self.content(400_000)
            var route = Route(content: content)
            route.contentRangeOverride = override
            route.bytesPerSecond = 2_000_000
            server.set(path, route)
            let id = try start(path)
            try await waitForBytes(id, atLeast: 100_000)
            _ = try await manager.pause(id)
            server.update(path) { $0.bytesPerSecond = nil }
            try manager.resume(id)
            try await wait(id, for: [.finished, .failed])
            XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content), path)
            let statuses = server.requests(for: path).map(\.status)
            XCTAssertEqual(statuses.last, 200, "\(path): started again without a range")
        }
    }

    func testConnectionCutMidBodyIsRetriedFromTheDurableOffset() async throws {
        let content = Self.content(800_000)
        var route = Route(content: content)
        route.closeAfter = 300_000
        route.misbehaveTimes = 1
        server.set("/cut", route)
        let id = try start("/cut")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        let requests = server.requests(for: "/cut")
        XCTAssertEqual(requests.count, 2)
        guard requests.count == 2 else { return }
        XCTAssertEqual(requests[1].range, "bytes=300000-", "resumed exactly where the durable data ended")
        XCTAssertTrue(observer.states(id).contains(.retrying))
    }

    func testStalledServerTimesOutAndIsRetried() async throws {
        let content = Self.content(200_000)
        var route = Route(content: content)
        route.stallAfter = 50_000
        route.misbehaveTimes = 1
        server.set("/stall", route)
        let id = try start("/stall") { $0.stallTimeout = 1 }
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        XCTAssertEqual(server.requests(for: "/stall").count, 2)
    }

    func testServerErrorsWithRetryAfterAreRetried() async throws {
        let content = Self.content(10_000)
        var route = Route(content: content)
        route.failFirst = (2, 503, "1")
        server.set("/busy", route)
        let id = try start("/busy")
        // While it waits (a second, as Retry-After asks), the task says why; once it runs again, no longer.
        let waiting = try await wait(id, for: [.retrying, .finished, .failed])
        XCTAssertEqual(waiting.state, .retrying)
        XCTAssertEqual(waiting.record.errorName, "HTTPError")
        XCTAssertTrue(waiting.record.errorMessage?.contains("503") == true, waiting.record.errorMessage ?? "")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertNil(done.record.errorName)
        XCTAssertNil(done.record.errorMessage)
        XCTAssertEqual(server.requests(for: "/busy").map(\.status), [503, 503, 200])
    }

    func testClientErrorsFailAtOnce() async throws {
        let id = try start("/missing")
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .failed)
        XCTAssertEqual(done.record.errorName, "HTTPError")
        XCTAssertTrue(done.record.errorMessage?.contains("404") ?? false)
        XCTAssertEqual(server.requests(for: "/missing").count, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("out\(id)")))
    }

    /// A server nobody listens on: retried, then failed with the system's reason as its message.
    func testARefusedConnectionFailsWithTheSystemsReason() async throws {
        let nothing = try FreePort.pick()
        let id = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: "http://127.0.0.1:\(nothing)/f",
                destination: directory.file("refused"),
                destinationIsDirectory: false, options: DownloadOptions()
            )
        ).id
        nextID += 1
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .failed)
        XCTAssertEqual(done.record.errorName, "NetworkError")
        XCTAssertTrue(
            done.record.errorMessage?.hasSuffix(": Connection refused (errno 111)") == true,
            done.record.errorMessage ?? "")
    }

    /// A name that does not resolve says so, with the resolver's reason, instead of "could not
    /// connect …: no address to try". The name's first label is longer than DNS allows (64
    /// characters), so the resolver refuses it without asking a name server.
    func testANameThatDoesNotResolveSaysSo() async throws {
        let host = String(repeating: "a", count: 64) + ".invalid"
        let id = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: "http://\(host)/f", destination: directory.file("unresolved"),
                destinationIsDirectory: false, options: DownloadOptions()
            )
        ).id
        nextID += 1
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.record.errorName, "NetworkError")
        XCTAssertTrue(
            done.record.errorMessage?.hasPrefix("could not resolve \(host): ") == true, done.record.errorMessage ?? "")
    }

    func testRedirectsAreFollowedAndChecked() async throws {
        let content = Self.content(5000)
        server.set("/final", Route(content: content))
        var hop2 = Route(content: []); hop2.redirect = (307, "/final")
        var hop1 = Route(content: []); hop1.redirect = (302, server.url("/hop2"))
        server.set("/hop2", hop2)
        server.set("/hop1", hop1)
        var loop = Route(content: []); loop.redirect = (301, "/loop")
        server.set("/loop", loop)
        var ftp = Route(content: []); ftp.redirect = (302, "ftp://127.0.0.1/file")
        server.set("/ftp", ftp)
        var unix = Route(content: []); unix.redirect = (302, "http+unix://%2Ftmp%2Fsock/x")
        server.set("/unix", unix)
        let ok = try start("/hop1")
        let looping = try start("/loop")
        let toFTP = try start("/ftp")
        let toUnix = try start("/unix")
        let done = try await wait(ok, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(done.record.finalURL, server.url("/final"))
        XCTAssertEqual(sha256(ofFile: directory.file("out\(ok)")), Self.sha256(content))
        let loopDone = try await wait(looping, for: [.finished, .failed])
        XCTAssertEqual(loopDone.record.errorName, "TooManyRedirects")
        XCTAssertEqual(server.requests(for: "/loop").count, 11)
        let ftpDone = try await wait(toFTP, for: [.finished, .failed])
        XCTAssertEqual(ftpDone.record.errorName, "InsecureRedirect")
        let unixDone = try await wait(toUnix, for: [.finished, .failed])
        XCTAssertEqual(unixDone.record.errorName, "InsecureRedirect")
    }

    func testChecksumIsVerifiedBeforeTheRename() async throws {
        let content = Self.content(50_000)
        server.set("/sum", Route(content: content))
        let good = try start("/sum") { $0.checksum = try? Checksum(.sha256, hex: Self.sha256(content)) }
        let bad = try start("/sum") { $0.checksum = try? Checksum(.sha256, hex: String(repeating: "0", count: 64)) }
        let goodDone = try await wait(good, for: [.finished, .failed])
        XCTAssertEqual(goodDone.state, .finished)
        let badDone = try await wait(bad, for: [.finished, .failed])
        XCTAssertEqual(badDone.state, .failed)
        XCTAssertEqual(badDone.record.errorName, "ChecksumMismatch")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("out\(bad)")))
        XCTAssertEqual(leftovers(), [])
    }

    func testExistingDestinationIsKeptUnlessOverwrite() async throws {
        let content = Self.content(1000)
        server.set("/x", Route(content: content))
        let existing = directory.file("existing")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
        let refused = try start("/x", destination: existing)
        let refusedDone = try await wait(refused, for: [.finished, .failed])
        XCTAssertEqual(refusedDone.record.errorName, "FileExists")
        XCTAssertEqual(try String(contentsOfFile: existing, encoding: .utf8), "keep me")
        let replaced = try start("/x", destination: existing) { $0.overwrite = true }
        try await wait(replaced, for: [.finished, .failed])
        XCTAssertEqual(sha256(ofFile: existing), Self.sha256(content))
    }

    func testTruncatedAndConflictingBodiesNeverFinishShort() async throws {
        let content = Self.content(100_000)
        var short = Route(content: content)
        short.contentLengthOverride = "200000"
        short.closeAfter = 100_000
        server.set("/short", short)
        var conflicting = Route(content: content)
        conflicting.conflictingContentLength = true
        server.set("/conflict", conflicting)
        var chunkedCut = Route(content: content)
        chunkedCut.chunked = true
        chunkedCut.closeAfter = 40_000
        chunkedCut.misbehaveTimes = 1
        server.set("/chunked", chunkedCut)
        let shortID = try start("/short")
        let conflictID = try start("/conflict")
        let chunkedID = try start("/chunked")
        let shortDone = try await wait(shortID, for: [.finished, .failed])
        XCTAssertEqual(shortDone.state, .failed, "a body shorter than its Content-Length never counts as finished")
        let conflictDone = try await wait(conflictID, for: [.finished, .failed])
        XCTAssertEqual(conflictDone.state, .failed)
        let chunkedDone = try await wait(chunkedID, for: [.finished, .failed])
        XCTAssertEqual(chunkedDone.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(chunkedID)")), Self.sha256(content))
    }

    func testGzipEncodedResponseIsStoredAsServed() async throws {
        let content = Self.content(3000)
        var route = Route(content: content)
        route.gzipEncoding = true
        server.set("/gz", route)
        let id = try start("/gz")
        try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(server.requests(for: "/gz").first?.acceptEncoding, "identity")
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
    }

    func testCallerHeadersAreSentAndCheckedForCRLF() async throws {
        server.set("/h", Route(content: Self.content(10)))
        let id = try start("/h") { $0.headers = ["X-Token": "abc"] }
        try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(server.requests(for: "/h").first?.userHeaders["x-token"], "abc")
        for headers in [["X-Evil": "a\r\nHost: other"], ["Range": "bytes=0-"]] {
            XCTAssertThrowsError(try start("/h") { $0.headers = headers }) { error in
                XCTAssertEqual((error as? DownloadError)?.code, .invalidArgument, "\(headers): \(error)")
            }
        }
    }

    func testBandwidthLimitStillDeliversTheFile() async throws {
        let content = Self.content(300_000)
        server.set("/bw", Route(content: content))
        let id = try start("/bw") { $0.maxBytesPerSecond = 1_000_000 }
        try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
    }
}

extension TransferTests {
    func testTLSFailuresAreFailuresNotRetriedOrIgnored() async throws {
        // An https URL to a plain-HTTP port: the handshake cannot succeed. The pool does not
        // retry connections by itself, so the failure comes at once, saying why.
        await manager.shutdown()
        manager = makeManager { $0.connectTimeout = 2 }
        server.set("/tls", Route(content: Self.content(100)))
        let id = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: "https://127.0.0.1:\(server.port)/tls",
                destination: directory.file("tls"),
                destinationIsDirectory: false
            )
        ).id
        let done = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .failed)
        XCTAssertEqual(done.record.errorName, "TLSError", done.record.errorMessage ?? "")
        XCTAssertTrue(
            done.record.errorMessage?.contains("does not speak TLS on this port") ?? false,
            done.record.errorMessage ?? "")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("tls")))
    }
}

extension TransferTests {
    func testResourceTimeoutEndsATransferThatTrickles() async throws {
        var route = Route(content: Self.content(1_000_000))
        route.bytesPerSecond = 20_000  // never stalls, never finishes in time
        server.set("/trickle", route)
        let id = try start("/trickle") { $0.resourceTimeout = 0.5 }
        let done = try await wait(id, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .failed)
        XCTAssertEqual(done.record.errorName, "Timeout")
        XCTAssertEqual(server.requests(for: "/trickle").count, 5, "the first attempt and 4 retries")
    }

    func testADripBelowTheMinimumSpeedEndsAsATimeoutAndIsRetried() async throws {
        var route = Route(content: Self.content(1_000_000))
        route.bytesPerSecond = 300  // a byte every few milliseconds: never a stall
        server.set("/drip", route)
        let id = try start("/drip") {
            $0.lowSpeedLimit = 1000
            $0.lowSpeedTime = 1
        }
        let done = try await wait(id, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .failed)
        XCTAssertEqual(done.record.errorName, "Timeout")
        XCTAssertTrue(
            done.record.errorMessage?.hasPrefix("slower than 1000 bytes/s for 1 s") ?? false,
            done.record.errorMessage ?? "")
        XCTAssertEqual(
            server.requests(for: "/drip").count, 5, "the first attempt and 4 retries, each from the durable offset")
    }

    func testATransferHeldToItsBandwidthLimitIsNotTakenForADrip() async throws {
        let content = Self.content(6000)
        server.set("/held", Route(content: content))
        let id = try start("/held") {
            $0.maxBytesPerSecond = 2000
            $0.lowSpeedLimit = 100_000
            $0.lowSpeedTime = 1
        }
        let done = try await wait(id, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
    }

    func testAThrottledTransferStopsAtOnce() async throws {
        // At 1 byte per second the first body part's wait lasts hours: Pause and Cancel must not
        // wait for it (the request is cancelled under it).
        // A small body arrives whole before the wait: the response has ended under it.
        server.set("/crawl", Route(content: Self.content(200_000)))
        server.set("/small", Route(content: Self.content(2000)))
        for (path, stop) in [("/crawl", "pause"), ("/crawl", "cancel"), ("/small", "pause"), ("/small", "cancel")] {
            let id = try start(path) { $0.maxBytesPerSecond = 1 }
            try await waitForBytes(id, atLeast: 1)
            let started = ContinuousClock.now
            if stop == "pause" { _ = try await manager.pause(id) } else { try await manager.cancel(id) }
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "\(stop) of \(path) returned at once")
            XCTAssertEqual(manager.snapshot(id)?.state, stop == "pause" ? .paused : .cancelled)
        }
    }

    func testALimitLiftedWhileWaitingAppliesAtOnce() async throws {
        // The first body part at 1 byte per second owes hours; setting the limit to 0 ends the wait.
        let content = Self.content(2000)
        server.set("/owed", Route(content: content))
        let id = try start("/owed") { $0.maxBytesPerSecond = 1 }
        try await waitForBytes(id, atLeast: 1)
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(manager.snapshot(id)?.state, .running, "still in the limit's wait")
        var change = DownloadOptions.Change()
        change.maxBytesPerSecond = 0
        _ = try manager.changeOptions(id, change)
        let done = try await wait(id, for: [.finished, .failed], seconds: 10)
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
    }

    func testBandwidthLimitIsAnUpperBound() async throws {
        // Only an upper bound on the rate is asserted: a slow machine can only make it slower.
        let content = Self.content(400_000)
        server.set("/limited", Route(content: content))
        let started = ContinuousClock.now
        let id = try start("/limited") { $0.maxBytesPerSecond = 200_000 }
        try await wait(id, for: [.finished, .failed])
        let elapsed = ContinuousClock.now - started
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(1500), "400 kB at 200 kB/s cannot take less than ~2 s")
    }
}
