@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// Pure logic: the state machine, the scheduler, retries, header rules, response decisions.
final class RulesTests: XCTestCase {
    func testStateMachineTransitions() {
        let allowed: [DownloadState: Set<DownloadState>] = [
            .queued: [.running, .paused, .cancelled, .failed],
            .running: [.finished, .failed, .paused, .cancelled, .retrying, .queued],
            .retrying: [.running, .paused, .cancelled, .failed, .queued],
            .paused: [.queued, .cancelled],
            .failed: [.queued, .cancelled],
            .finished: [],
            .cancelled: [],
        ]
        for from in DownloadState.allCases {
            for to in DownloadState.allCases {
                XCTAssertEqual(from.canTransition(to: to), allowed[from]?.contains(to) ?? false, "\(from) → \(to)")
            }
        }
    }

    func testSchedulerPrioritiesFIFOAndLimits() {
        var scheduler = Scheduler(maxRunning: 2, maxRunningPerSession: 2)
        scheduler.enqueue(1, session: SessionID(owner: 1, name: "a"), priority: .low)
        scheduler.enqueue(2, session: SessionID(owner: 1, name: "a"), priority: .normal)
        scheduler.enqueue(3, session: SessionID(owner: 1, name: "b"), priority: .high)
        scheduler.enqueue(4, session: SessionID(owner: 1, name: "b"), priority: .normal)
        XCTAssertEqual(scheduler.next(), [3, 2])
        XCTAssertEqual(scheduler.next(), [])
        scheduler.remove(3)
        XCTAssertEqual(scheduler.next(), [4])
        scheduler.remove(2)
        scheduler.remove(4)
        XCTAssertEqual(scheduler.next(), [1])
        var perSession = Scheduler(maxRunning: 10, maxRunningPerSession: 1)
        perSession.enqueue(1, session: SessionID(owner: 1, name: "a"), priority: .normal)
        perSession.enqueue(2, session: SessionID(owner: 1, name: "a"), priority: .normal)
        perSession.enqueue(3, session: SessionID(owner: 1, name: "b"), priority: .normal)
        XCTAssertEqual(perSession.next(), [1, 3])
    }

    func testSchedulerStartsOnlyWhatTheNetworkAllows() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4)
        let session = SessionID(owner: 1, name: "a")
        scheduler.network = NetworkStatus(online: false)
        scheduler.enqueue(1, session: session, priority: .normal, allowMetered: false)
        scheduler.enqueue(2, session: session, priority: .normal)
        XCTAssertEqual(scheduler.next(), [], "nothing starts offline")
        scheduler.network = NetworkStatus(online: true, metered: true)
        XCTAssertEqual(scheduler.next(), [2], "on a metered network only tasks that allow it")
        var options = DownloadOptions()
        options.allowMetered = true
        scheduler.update(1, options)
        XCTAssertEqual(scheduler.next(), [1])
        XCTAssertEqual(NetworkStatus(online: false).waitingFor(allowMetered: true), .network)
        XCTAssertEqual(NetworkStatus(metered: true).waitingFor(allowMetered: false), .unmeteredNetwork)
        XCTAssertEqual(NetworkStatus(metered: true).waitingFor(allowMetered: true), .slot)
    }

    func testSchedulerSharesPlacesFairlyBetweenUsers() {
        var scheduler = Scheduler(maxRunning: 3, maxRunningPerSession: 3)
        let a = SessionID(owner: 1000, name: "bulk"), b = SessionID(owner: 1001, name: "one"), c = SessionID(owner: 1002, name: "x")
        for id in 1...10 { scheduler.enqueue(UInt64(id), session: a, priority: .high) }
        scheduler.enqueue(11, session: b, priority: .low)
        XCTAssertEqual(scheduler.next(), [1, 11, 2], "user b's low-priority task is not kept waiting by a's high ones")
        scheduler.remove(11)
        scheduler.enqueue(12, session: c, priority: .normal)
        XCTAssertEqual(scheduler.next(), [12], "the place goes to the user with none running")
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3], "then back to a, in its own order")
    }

    func testSchedulerCountsConnectionsAgainstTheirOwnLimit() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 3, maxConnections: 10)
        let a = SessionID(owner: 1000, name: "a"), b = SessionID(owner: 1000, name: "b")
        scheduler.enqueue(1, session: a, priority: .normal, connections: 8)
        scheduler.enqueue(2, session: a, priority: .normal, connections: 4)
        scheduler.enqueue(3, session: b, priority: .normal, connections: 2)
        scheduler.enqueue(4, session: b, priority: .normal, connections: 1)
        XCTAssertEqual(scheduler.next(), [1, 2], "8, then 2 of the 4 task 2 asked for, fill the 10; 3 and 4 wait")
        XCTAssertEqual([scheduler.connections(of: 1), scheduler.connections(of: 2)], [8, 2])
        XCTAssertEqual(scheduler.connectionCount, 10)
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3, 4], "2 + 2 + 1 of 10")
        XCTAssertEqual(scheduler.connectionCount, 5)
        scheduler.remove(2)
        scheduler.remove(3)
        scheduler.remove(4)
        scheduler.enqueue(5, session: a, priority: .normal, connections: 16)
        XCTAssertEqual(scheduler.next(), [5], "16 connections count as the 10 there are")
        XCTAssertEqual(scheduler.connectionCount, 10)
        var tasks = Scheduler(maxRunning: 2, maxRunningPerSession: 2, maxConnections: 16)
        for id in 6...8 { tasks.enqueue(UInt64(id), session: a, priority: .normal) }
        XCTAssertEqual(tasks.next(), [6, 7], "single streams are still held to the transfer limit")
    }

    func testALargeTaskIsNeverPassedByTheSmallerOnesBehindIt() {
        var scheduler = Scheduler(maxRunning: 4, maxRunningPerSession: 4, maxConnections: 16)
        let a = SessionID(owner: 1000, name: "a")
        scheduler.enqueue(1, session: a, priority: .normal, connections: 8)
        scheduler.enqueue(2, session: a, priority: .normal, connections: 8)
        XCTAssertEqual(scheduler.next(), [1, 2])
        scheduler.enqueue(3, session: a, priority: .normal, connections: 16)
        for id in 4...6 { scheduler.enqueue(UInt64(id), session: a, priority: .normal) }
        XCTAssertEqual(scheduler.next(), [], "no place is free")
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3], "the 16-connection task starts with the 8 places free, before the single streams")
        XCTAssertEqual(scheduler.connections(of: 3), 8)
        scheduler.remove(2)
        XCTAssertEqual(scheduler.next(), [4, 5, 6], "then the single streams behind it")
    }

    func testPlacesNoQueuedTaskCanTakeGoToRunningTasksThatAskedForMore() {
        var scheduler = Scheduler(maxRunning: 3, maxRunningPerSession: 3, maxConnections: 8)
        let a = SessionID(owner: 1000, name: "a"), b = SessionID(owner: 1001, name: "b")
        scheduler.enqueue(1, session: a, priority: .normal, connections: 6)
        scheduler.enqueue(2, session: a, priority: .normal, connections: 4)
        XCTAssertEqual(scheduler.next(), [1, 2])
        XCTAssertEqual(scheduler.grow(), [:], "no place is free")
        XCTAssertEqual(scheduler.connections(of: 2), 2, "task 2 holds the 2 places left of the 4 it asked for")
        scheduler.enqueue(3, session: b, priority: .normal, connections: 4)
        scheduler.remove(1)
        XCTAssertEqual(scheduler.next(), [3], "a queued task takes freed places first")
        XCTAssertEqual(scheduler.grow(), [2: 2], "the places it leaves go to the running task short of its connections")
        XCTAssertEqual([scheduler.connections(of: 2), scheduler.connections(of: 3), scheduler.connectionCount], [4, 4, 8])
        scheduler.remove(2)
        scheduler.enqueue(5, session: a, priority: .normal)
        scheduler.enqueue(4, session: a, priority: .normal, connections: 6)
        XCTAssertEqual(scheduler.next(), [5, 4], "5 then 4 in user a's order, 4 on the 3 places left")
        XCTAssertEqual(scheduler.connections(of: 4), 3)
        XCTAssertEqual(scheduler.grow(), [:], "8 of 8")
        scheduler.giveBack(3, 2)
        XCTAssertEqual(scheduler.grow(), [3: 2], "places go to the user holding fewer (b: 2, a: 4), as in next()")
        scheduler.giveBack(3, 2)
        scheduler.settle(4)
        XCTAssertEqual(scheduler.connections(of: 4), 1, "one stream from now on: one place")
        XCTAssertEqual(scheduler.grow(), [3: 2], "and it is offered none again")
        XCTAssertEqual(scheduler.grow(), [:])
    }

    func testAStartTakenBackBeforeItTookEffectIsToldApartByItsTicket() throws {
        var scheduler = Scheduler(maxRunning: 1, maxRunningPerSession: 1)
        let a = SessionID(owner: 1000, name: "a")
        scheduler.enqueue(1, session: a, priority: .normal)
        XCTAssertEqual(scheduler.next(), [1])
        let first = try XCTUnwrap(scheduler.ticket(of: 1))
        // Paused and resumed before that start took effect: a new queue entry, started anew.
        scheduler.remove(1)
        scheduler.enqueue(1, session: a, priority: .normal)
        XCTAssertNil(scheduler.ticket(of: 1), "queued, not running")
        XCTAssertEqual(scheduler.next(), [1])
        let second = try XCTUnwrap(scheduler.ticket(of: 1))
        XCTAssertNotEqual(first, second)
        // The first start, refused, gives back nothing the second holds.
        scheduler.remove(1, ticket: first)
        XCTAssertEqual([scheduler.runningCount, scheduler.connectionCount], [1, 1])
        scheduler.remove(1, ticket: second)
        XCTAssertEqual([scheduler.runningCount, scheduler.connectionCount], [0, 0])
    }

    func testSegmentTableSplitsStealsAndCutsAtEachEnd() throws {
        let coarse = SegmentTable(length: 1000, remaining: [ByteRange(start: 0, end: 1000)], pieces: 4, minimumSplit: 300)
        XCTAssertEqual([coarse.claim()?.start, coarse.claim()?.start, coarse.claim()?.start], [0, 333, 666], "equal thirds, not four below the minimum")
        XCTAssertNil(coarse.claim(), "about 333 bytes left in each: not split below twice the minimum")
        let resumed = SegmentTable(
            length: 1000, remaining: [ByteRange(start: 100, end: 200), ByteRange(start: 400, end: 1000)], pieces: 3, minimumSplit: 100
        )
        XCTAssertEqual(resumed.held, 300)
        XCTAssertEqual((0..<3).compactMap { _ in resumed.claim()?.start }, [100, 400, 700], "the largest range left is halved")

        let table = SegmentTable(length: 1000, remaining: [ByteRange(start: 0, end: 1000)], pieces: 4, minimumSplit: 100)
        XCTAssertEqual(table.remaining, [ByteRange(start: 0, end: 1000)], "adjacent ranges read as one")
        let first = try XCTUnwrap(table.claim(startingAt: 0))
        XCTAssertEqual([first.start, first.end], [0, 250])
        let claims = (0..<3).compactMap { _ in table.claim() }
        XCTAssertEqual(claims.map(\.start), [250, 500, 750])
        // A fifth connection steals the second half of the largest range (the lowest of equals).
        let fifth = try XCTUnwrap(table.claim())
        XCTAssertEqual([fifth.start, fifth.end], [125, 250])
        XCTAssertEqual(table.range(of: first.id), ByteRange(start: 0, end: 125))
        // Bytes past a range's end are not its own: cut and reported complete. (The writer is
        // never drained here: the table's bookkeeping is what is tested.)
        let writer = PartialFileWriter(path: "/nonexistent/never-written", fileAccess: DirectFileAccess(), queue: .init(label: "t"))
        let loop = EmbeddedEventLoop()
        let handed = table.write(first.id, ByteBuffer(bytes: [UInt8](repeating: 1, count: 300)), writer: writer, eventLoop: loop)
        XCTAssertEqual(handed.accepted, 125)
        XCTAssertTrue(handed.complete)
        XCTAssertEqual(table.held, 125)
        XCTAssertNil(table.range(of: first.id))
        _ = table.write(claims[0].id, ByteBuffer(bytes: [UInt8](repeating: 1, count: 10)), writer: writer, eventLoop: loop)
        let stolen = try XCTUnwrap(table.claim())
        XCTAssertEqual([stolen.start, stolen.end], [625, 750])
        XCTAssertEqual(table.range(of: claims[1].id), ByteRange(start: 500, end: 625))
        XCTAssertEqual(table.remaining, [ByteRange(start: 125, end: 250), ByteRange(start: 260, end: 1000)])
        table.release(claims[2].id)
        XCTAssertEqual(table.claim()?.start, 750, "a released range waits for the next connection")
        XCTAssertFalse(table.isComplete)
        try? loop.syncShutdownGracefully()
    }

    func testRetryPolicyBacksOffWithJitterAndHonoursRetryAfter() {
        let policy = RetryPolicy(maxAttempts: 3, baseDelay: 1, maxDelay: 3, retryAfterCap: 10)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: nil, random: 0.5), 1)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: nil, random: 0.5), 2)
        XCTAssertEqual(policy.delay(forRetry: 3, retryAfter: nil, random: 0.5), 3)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: nil, random: 0), 0.8)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: 100, random: 0), 10)
        XCTAssertNil(policy.delay(forRetry: 4, retryAfter: nil, random: 0))
        var headers = HTTPHeaders()
        headers.add(name: "Retry-After", value: "120")
        XCTAssertEqual(HTTPHeaderRules.retryAfter(headers, cap: 60), 60)
        var dated = HTTPHeaders()
        dated.add(name: "Retry-After", value: "Tue, 14 Nov 2023 22:13:30 GMT")
        XCTAssertEqual(HTTPHeaderRules.retryAfter(dated, now: Date(timeIntervalSince1970: 1_700_000_000), cap: 60), 10)
    }

    func testContentRangeParsing() {
        XCTAssertEqual(HTTPHeaderRules.parseContentRange("bytes 0-99/200"), .init(first: 0, last: 99, complete: 200))
        XCTAssertEqual(HTTPHeaderRules.parseContentRange("bytes 5-9/*"), .init(first: 5, last: 9, complete: nil))
        XCTAssertEqual(HTTPHeaderRules.parseContentRange("bytes */300"), .init(first: nil, last: nil, complete: 300))
        for bad in ["bytes 9-5/10", "bytes 0-10/10", "bits 0-1/2", "bytes -1-2/3", "bytes */*", "bytes x", ""] {
            XCTAssertNil(HTTPHeaderRules.parseContentRange(bad), bad)
        }
    }

    func testValidators() {
        XCTAssertEqual(HTTPHeaderRules.strongValidator(["ETag": "\"abc\""]), "\"abc\"")
        XCTAssertNil(HTTPHeaderRules.strongValidator(["ETag": "W/\"abc\""]))
        XCTAssertEqual(
            HTTPHeaderRules.strongValidator(["Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT", "Date": "Tue, 14 Nov 2023 22:13:21 GMT"]),
            "Tue, 14 Nov 2023 22:13:20 GMT"
        )
        XCTAssertNil(HTTPHeaderRules.strongValidator(["Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT", "Date": "Tue, 14 Nov 2023 22:13:20 GMT"]))
        XCTAssertNil(HTTPHeaderRules.strongValidator(["Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT"]))
    }

    func testFileNameSanitising() {
        XCTAssertEqual(HTTPHeaderRules.sanitize("../../etc/passwd"), "_.._etc_passwd")
        XCTAssertEqual(HTTPHeaderRules.sanitize(".hidden"), "hidden")
        XCTAssertEqual(HTTPHeaderRules.sanitize("a\u{0}b\nc"), "a_b_c")
        XCTAssertNil(HTTPHeaderRules.sanitize(".."))
        XCTAssertNil(HTTPHeaderRules.sanitize(""))
        XCTAssertEqual(HTTPHeaderRules.fileName(contentDisposition: nil, url: "http://h/dir/"), "dir")
        XCTAssertEqual(HTTPHeaderRules.fileName(contentDisposition: nil, url: "http://h/"), "download")
        XCTAssertEqual(HTTPHeaderRules.fileName(contentDisposition: "inline", url: "http://h/a%20b"), "a b")
    }

    /// The names a hostile server sends (issue 22): terminal controls, spoofed extensions, names
    /// too long for the file system once ` (n)` is added.
    func testHostileFileNames() throws {
        // C1 CSI, OSC and ST, as UTF-8 in filename*.
        let c1 = HTTPHeaderRules.fileName(
            contentDisposition: "attachment; filename*=UTF-8''%C2%9B2J%C2%9D0%3Bpwned%C2%9Cevil.txt", url: "http://h/x"
        )
        XCTAssertEqual(c1, "_2J_0;pwned_evil.txt")
        // The same in the URL's last segment (a redirect's target).
        XCTAssertEqual(HTTPHeaderRules.fileName(contentDisposition: nil, url: "http://h/a/%1B%5B2J%C2%9Bx.bin"), "_[2J_x.bin")
        // Bidi overrides and isolates, marks and other format characters.
        for spoof in ["invoice%E2%80%AEfdp.exe", "invoice%E2%80%8Ffdp.exe", "invoice%E2%81%A6fdp.exe", "invoice%E2%80%8Bfdp.exe"] {
            XCTAssertEqual(HTTPHeaderRules.fileName(contentDisposition: "attachment; filename*=UTF-8''\(spoof)", url: "http://h/x"),
                           "invoice_fdp.exe", spoof)
        }
        XCTAssertEqual(HTTPHeaderRules.sanitize("a\u{85}b\u{2028}c\u{2029}d"), "a_b_c_d")
        XCTAssertEqual(HTTPHeaderRules.sanitize("Ünïcödé 文件 🎉.txt"), "Ünïcödé 文件 🎉.txt")
        // Within NAME_MAX including " (999)", keeping the extension; whole characters only.
        let long = String(repeating: "é", count: 200) + ".tar.gz"
        let kept = try XCTUnwrap(HTTPHeaderRules.sanitize(long))
        XCTAssertLessThanOrEqual(kept.utf8.count, HTTPHeaderRules.maximumNameBytes)
        XCTAssertTrue(kept.hasSuffix("é.gz") || kept.hasSuffix("é.tar.gz"), kept)
        XCTAssertEqual(HTTPHeaderRules.sanitize(String(repeating: "a", count: 300)), String(repeating: "a", count: HTTPHeaderRules.maximumNameBytes))
        // An "extension" that is really a long sentence is not kept whole.
        let sentence = "x." + String(repeating: "y", count: 300)
        XCTAssertEqual(HTTPHeaderRules.sanitize(sentence)?.utf8.count, HTTPHeaderRules.maximumNameBytes)
        // Every candidate the finaliser tries fits NAME_MAX.
        let name = try XCTUnwrap(HTTPHeaderRules.sanitize(String(repeating: "n", count: 400) + ".txt"))
        for candidate in TransferFinalizer.candidates(in: "/d", name: name) {
            XCTAssertLessThanOrEqual(String(candidate.dropFirst(3)).utf8.count, 255, candidate)
            XCTAssertTrue(candidate.hasSuffix(".txt"))
        }
    }

    func testResponseDecisions() {
        func decide(_ status: Int, _ headers: HTTPHeaders, offset: Int64 = 100, known: Int64 = 1000) -> ResponseDecision {
            ResponseDecision.decide(status: status, reason: "", headers: headers, requestedOffset: offset,
                                    knownLength: known, validator: "\"v\"", retryAfterCap: 60, ranged: offset > 0)
        }
        XCTAssertEqual(decide(200, ["Content-Length": "5", "ETag": "\"n\""]), .write(offset: 0, truncate: true, expectedLength: 5, validator: "\"n\""))
        XCTAssertEqual(decide(206, ["Content-Range": "bytes 100-999/1000"]), .write(offset: 100, truncate: false, expectedLength: 1000, validator: "\"v\""))
        XCTAssertEqual(decide(206, ["Content-Range": "bytes 0-999/1000"]), .restartFromZero(reason: "206 starting at 0, asked for 100"))
        if case .restartFromZero = decide(206, ["Content-Range": "bytes 100-1999/2000"]) {} else { XCTFail("length changed") }
        if case .restartFromZero = decide(206, ["Content-Range": "nonsense"]) {} else { XCTFail("malformed") }
        if case .restartFromZero = decide(206, ["Content-Range": "bytes 100-999/1000", "ETag": "\"other\""]) {} else { XCTFail("etag") }
        XCTAssertEqual(decide(416, ["Content-Range": "bytes */1000"], offset: 1000), .alreadyComplete)
        if case .restartFromZero = decide(416, ["Content-Range": "bytes */900"], offset: 1000) {} else { XCTFail("416 other") }
        XCTAssertEqual(decide(302, ["Location": "/x"]), .redirect("/x"))
        if case .fail(let error) = decide(503, ["Retry-After": "7"]) {
            XCTAssertTrue(error.isRetryable)
            XCTAssertEqual(error.retryAfter, 7)
        } else { XCTFail("503") }
        if case .fail(let error) = decide(403, [:]) { XCTAssertFalse(error.isRetryable) } else { XCTFail("403") }
        if case .fail(let error) = decide(429, [:]) { XCTAssertTrue(error.isRetryable) } else { XCTFail("429") }
    }

    func testRedirectChecks() throws {
        XCTAssertEqual(try RedirectRules.checkedRedirect(from: "http://a/b/c", to: "d"), "http://a/b/d")
        XCTAssertEqual(try RedirectRules.checkedRedirect(from: "http://a/b", to: "https://c/d"), "https://c/d")
        XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: "https://a/b", to: "http://a/b"))
        XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: "http://a/b", to: "file:///etc/passwd"))
        XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: "http://a/b", to: "unix:///run/x"))
    }
}

extension RulesTests {
    /// Errors compare by code, as AsyncHTTPClient's do: the message says more about the same error.
    func testDownloadErrorsCompareByCode() {
        XCTAssertEqual(DownloadError.network("reset"), DownloadError.network("refused"))
        XCTAssertNotEqual(DownloadError.network("x"), DownloadError.timeout("x"))
        XCTAssertEqual(DownloadError.checksumMismatch(expected: "a", actual: "b").code, .checksumMismatch)
        XCTAssertEqual(Set([DownloadError.file("a"), DownloadError.file("b")]).count, 1)
        XCTAssertEqual(DownloadError.allNames.count, DownloadError.Code.allCases.count)
    }
}
