import Crypto
import DownloadEngine
import DownloadModel
import Foundation
import TestHTTPServer
import XCTest

/// Segmented downloads (`connections` > 1) against the misbehaving server, which limits each
/// response's rate as mirrors limit each connection: bytes on disk are checked by SHA-256, the
/// requests by their `Range` and `If-Range` headers.
final class SegmentedTransferTests: EngineTestCase {
    static let size = 8 << 20

    /// A route served at `rate` bytes per second per connection.
    func serve(_ path: String, _ content: [UInt8], rate: Int = 8_000_000, _ change: (inout Route) -> Void = { _ in }) {
        var route = Route(content: content)
        route.bytesPerSecond = rate
        change(&route)
        server.set(path, route)
    }

    func startSegmented(_ path: String, connections: Int = 4, stallTimeout: Double? = nil) throws -> UInt64 {
        try start(path) { options in
            options.connections = connections
            options.stallTimeout = stallTimeout
        }
    }

    /// Waits for the task to end and checks it finished with exactly `content` in `file`
    /// (`out<id>` by default).
    func assertFinished(_ id: UInt64, holding content: [UInt8], file: String? = nil, line: UInt = #line) async throws {
        let done = try await wait(id, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "", line: line)
        XCTAssertEqual(sha256(ofFile: directory.file(file ?? "out\(id)")), Self.sha256(content), line: line)
    }

    /// A four-connection download of `path` (2 MB/s per connection), paused after 2 MB.
    func pausedMidway(_ path: String) async throws -> (id: UInt64, content: [UInt8], blob: [UInt8]) {
        let content = Self.content(Self.size)
        serve(path, content, rate: 2_000_000)
        let id = try startSegmented(path, connections: 4)
        try await waitForBytes(id, atLeast: 2_000_000)
        return (id, content, try await manager.pause(id))
    }

    /// The `Range` headers that ask for exactly `segments`.
    func rangeHeaders(_ segments: [ByteRange]) -> Set<String> {
        Set(segments.map { "bytes=\($0.start)-\($0.end - 1)" })
    }

    /// The ranges asked for, as (first, last) byte pairs, in request order.
    func ranges(_ path: String) -> [(Int, Int?)] {
        server.requests(for: path).compactMap { request in
            guard let range = request.range, range.hasPrefix("bytes=") else { return nil }
            let parts = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, let first = Int(parts[0]) else { return nil }
            return (first, Int(parts[1]))
        }
    }

    func testSegmentedDownloadSplitsIntoRangesWithIfRangeAndMatchesTheSource() async throws {
        let content = Self.content(Self.size)
        serve("/seg", content)
        let id = try startSegmented("/seg", connections: 4)
        try await assertFinished(id, holding: content)
        let requests = server.requests(for: "/seg")
        XCTAssertNil(requests.first?.range, "the first request asks for the whole resource")
        let ranged = requests.dropFirst()
        XCTAssertGreaterThanOrEqual(ranged.count, 3, "three more connections")
        for request in ranged {
            XCTAssertEqual(request.ifRange, "\"v1\"", "every range carries the strong validator")
            XCTAssertEqual(request.status, 206)
        }
        // The first three extra ranges are the quarters the first response did not keep.
        let quarter = Self.size / 4
        XCTAssertEqual(Set(ranges("/seg").prefix(3).map { $0.0 }), [quarter, 2 * quarter, 3 * quarter])
        XCTAssertTrue(ranges("/seg").allSatisfy { $0.1 != nil }, "every range is bounded")
        // Nothing was fetched twice beyond what work stealing cut short.
        let served = requests.map(\.bodyBytesSent).reduce(0, +)
        XCTAssertLessThan(served, Self.size + Self.size / 4, "served \(served)")
        XCTAssertEqual(leftovers(), [])
    }

    func testAFastConnectionStealsHalfOfASlowOnesRange() async throws {
        // The first connection trickles; the others finish their ranges and take halves of
        // what it has left, so it stops long before the end of its first range.
        await manager.shutdown()
        manager = makeManager { $0.minimumSegment = 128 * 1024 }
        let content = Self.content(Self.size)
        serve("/steal", content, rate: 50_000_000) { $0.bytesPerSecondWithoutRange = 1_000_000 }
        let id = try startSegmented("/steal", connections: 4)
        try await assertFinished(id, holding: content)
        let requests = server.requests(for: "/steal")
        let first = try XCTUnwrap(requests.first)
        XCTAssertNil(first.range)
        XCTAssertLessThan(first.bodyBytesSent, Self.size * 3 / 16, "the slow connection's quarter was taken over")
        XCTAssertGreaterThan(requests.count, 5, "ranges were stolen: \(requests.map { $0.range ?? "-" })")
    }

    func testACutRangeIsRetriedAloneFromWhereItStopped() async throws {
        let content = Self.content(Self.size)
        serve("/cut", content) { route in
            route.closeAfter = 300_000
            route.misbehaveRangedOnly = true
            route.misbehaveTimes = 3
        }
        let id = try startSegmented("/cut", connections: 4)
        try await assertFinished(id, holding: content)
        // Each cut range is asked again from the byte after the last one received.
        let quarter = Self.size / 4
        let resumed = ranges("/cut").filter { range in (1...3).contains { range.0 == $0 * quarter + 300_000 } }
        XCTAssertEqual(resumed.count, 2, "\(ranges("/cut"))")
        XCTAssertEqual(observer.states(id), [.running, .finished], "a cut range does not stop the download")
    }

    func testAStalledRangeTimesOutAndIsFetchedAgain() async throws {
        let content = Self.content(4 << 20)
        serve("/stall", content) { route in
            route.stallAfter = 100_000
            route.misbehaveRangedOnly = true
            route.misbehaveTimes = 2
        }
        let id = try startSegmented("/stall", connections: 2, stallTimeout: 1)
        try await assertFinished(id, holding: content)
        XCTAssertTrue(ranges("/stall").contains { $0.0 > 2 << 20 }, "the stalled range was asked again past its start")
    }

    func testARangeAnswered200RestartsFromZeroOnOneStream() async throws {
        let content = Self.content(Self.size)
        serve("/ignore", content) { $0.wholeBodyForRangesFrom = 1 }
        let id = try startSegmented("/ignore", connections: 4)
        try await assertFinished(id, holding: content)
        // Counted, not read in order: the server records requests as its event loops take them,
        // and a range asked on a busy loop just before the restart can be taken after it.
        let requests = server.requests(for: "/ignore"), seen = "\(requests.map { $0.range ?? "-" })"
        XCTAssertEqual(requests.filter { $0.range == nil }.count, 2, "the first request and the restart's: \(seen)")
        XCTAssertTrue(
            requests.contains { $0.range == nil && $0.bodyBytesSent == Self.size },
            "after the 200 one stream from the start: \(seen)")
        XCTAssertLessThanOrEqual(
            requests.filter { $0.range != nil }.count, 3, "no segmenting again in the same run: \(seen)")
    }

    func testAWrongContentRangeRestartsFromZeroOnOneStream() async throws {
        let content = Self.content(Self.size)
        serve("/wrong", content) { $0.contentRangeOverride = "bytes 0-99/\(Self.size)" }
        let id = try startSegmented("/wrong", connections: 4)
        try await assertFinished(id, holding: content)
        // The first request and the restart's are the only ones without a range. (Not "the last
        // request has none": the server records requests as its event loops take them, and a
        // range asked on a busy loop just before the restart can be taken after it.)
        let requests = server.requests(for: "/wrong")
        XCTAssertEqual(requests.filter { $0.range == nil }.count, 2, "\(requests.map { $0.range ?? "-" })")
    }

    func testTheFileChangingUnderARangeIsNeverSpliced() async throws {
        let old = Self.content(Self.size, seed: 1)
        let new = Self.content(Self.size - 12345, seed: 2)
        serve("/change", old, rate: 2_000_000)
        let id = try startSegmented("/change", connections: 4)
        try await waitForBytes(id, atLeast: 1_000_000)
        server.update("/change") { route in
            route.content = new
            route.etag = "\"v2\""
            route.bytesPerSecond = nil
            route.closeAfter = nil
        }
        // The running responses still send the old version; cut them so new requests go out.
        let paused = try await manager.pause(id)
        XCTAssertFalse(paused.isEmpty)
        try manager.resume(id)
        try await assertFinished(id, holding: new)
        XCTAssertTrue(server.requests(for: "/change").contains { $0.ifRange == "\"v1\"" && $0.status == 200 })
    }

    func testPauseRecordsEveryRangeAndResumeFetchesOnlyWhatIsLeft() async throws {
        let (id, content, blob) = try await pausedMidway("/pause")
        let text = String(decoding: blob, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("org.example.Downloads.ResumeData/3\n"), text)
        let data = try manager.decodeResumeData(blob, owner: Self.owner)
        let segments = try XCTUnwrap(data.segments, "resume data lists the ranges left")
        XCTAssertEqual(segments.count, 4, "\(segments)")
        XCTAssertEqual(data.offset, ByteRange.held(length: Int64(Self.size), remaining: segments))
        XCTAssertGreaterThan(data.offset, 0)
        let before = server.requests(for: "/pause").count
        server.update("/pause") { $0.bytesPerSecond = 20_000_000 }
        try manager.resume(id)
        try await assertFinished(id, holding: content)
        let after = server.requests(for: "/pause").dropFirst(before)
        let starts = Set(after.compactMap { $0.range }.prefix(4))
        XCTAssertEqual(starts, rangeHeaders(segments), "each range resumes where it was durable")
        XCTAssertTrue(after.allSatisfy { $0.ifRange == "\"v1\"" })
    }

    func testResumeThroughARedirectFetchesTheRecordedRangesWhereItPoints() async throws {
        // The URL given redirects (as release downloads do to a CDN): on resume the ranged
        // requests to it are answered 302, and the ranges left are fetched where it points.
        let content = Self.content(Self.size)
        serve("/target", content, rate: 2_000_000)
        var moved = Route(content: [])
        moved.redirect = (302, "/target")
        server.set("/moved", moved)
        let id = try startSegmented("/moved", connections: 4)
        try await waitForBytes(id, atLeast: 2_000_000)
        let data = try manager.decodeResumeData(try await manager.pause(id), owner: Self.owner)
        let segments = try XCTUnwrap(data.segments)
        let before = server.requests(for: "/target").count
        server.update("/target") { $0.bytesPerSecond = 20_000_000 }
        try manager.resume(id)
        try await assertFinished(id, holding: content)
        XCTAssertTrue(
            server.requests(for: "/moved").contains { $0.range != nil }, "the resumed ranges asked the URL given")
        let after = server.requests(for: "/target").dropFirst(before)
        XCTAssertEqual(Set(after.compactMap { $0.range }.prefix(segments.count)), rangeHeaders(segments))
        XCTAssertTrue(
            after.allSatisfy { $0.ifRange == "\"v1\"" && $0.status == 206 }, "never a whole body: no splice, no restart"
        )
    }

    func testATaskStartsWithTheConnectionPlacesLeftInsteadOfWaiting() async throws {
        // 4 places: a three-connection download takes 3; one that asks for 4 starts at once on
        // the one left (one stream: its only request asks for the whole file) instead of waiting.
        await manager.shutdown()
        manager = makeManager { $0.maxConnections = 4 }
        let slow = Self.content(Self.size)
        serve("/wide", slow, rate: 500_000)
        let wide = try startSegmented("/wide", connections: 3)
        try await waitForBytes(wide, atLeast: 100_000)
        let content = Self.content(3 << 20, seed: 2)
        serve("/narrow", content, rate: 20_000_000, { $0.etag = "\"n\"" })
        let narrow = try startSegmented("/narrow", connections: 4)
        try await assertFinished(narrow, holding: content)
        XCTAssertEqual(server.requests(for: "/narrow").map { $0.range }, [nil], "one stream on the one place left")
        XCTAssertEqual(manager.snapshot(wide)?.state, .running)
        _ = try await manager.pause(wide)
    }

    func testPlacesThatFreeUpJoinARunningSegmentedDownload() async throws {
        // 4 places: a three-connection download takes 3, one asking for 4 starts on the one
        // left; when the first is paused its 3 places join the second as new connections,
        // each taking half of the largest range left.
        await manager.shutdown()
        manager = makeManager { $0.maxConnections = 4 }
        serve("/holder", Self.content(Self.size), rate: 500_000)
        let holder = try startSegmented("/holder", connections: 3)
        try await waitForBytes(holder, atLeast: 100_000)
        let content = Self.content(Self.size, seed: 3)
        serve("/grows", content, rate: 1_000_000, { $0.etag = "\"g\"" })
        let grows = try startSegmented("/grows", connections: 4)
        try await waitForBytes(grows, atLeast: 200_000)
        XCTAssertEqual(server.requests(for: "/grows").count, 1, "one connection while no place is free")
        _ = try await manager.pause(holder)
        try await assertFinished(grows, holding: content)
        let requests = server.requests(for: "/grows")
        XCTAssertEqual(requests.first?.range, nil, "the first request asked for the whole file")
        XCTAssertGreaterThanOrEqual(
            requests.dropFirst().filter { $0.range != nil && $0.ifRange == "\"g\"" }.count, 3,
            "three more connections fetched ranges, with If-Range")
    }

    func testResumeDataOfARemovedTaskTakesOverItsRanges() async throws {
        let (id, content, blob) = try await pausedMidway("/adopt")
        let data = try manager.decodeResumeData(blob, owner: Self.owner)
        let segments = try XCTUnwrap(data.segments)
        try await manager.remove(id, keepingPartialFile: true)
        let before = server.requests(for: "/adopt").count
        server.update("/adopt") { $0.bytesPerSecond = nil }
        let adopted = try await manager.adopt(data, change: DownloadOptions.Change())
        XCTAssertEqual(adopted.record.segments, segments)
        try await assertFinished(adopted.id, holding: content, file: "out\(id)")
        let first = server.requests(for: "/adopt").dropFirst(before).compactMap(\.range).prefix(segments.count)
        XCTAssertEqual(Set(first), rangeHeaders(segments))
    }

    func testResumeDataOfVersionTwoIsStillRead() throws {
        var record = DownloadTaskRecord(
            id: 9, owner: Self.owner, session: "s", url: "http://127.0.0.1/x", destination: "/tmp/x",
            destinationIsDirectory: false, options: DownloadOptions(), durableOffset: 10, expectedLength: 100,
            validator: "\"v\""
        )
        record.segments = nil
        let current = try ResumeData(record: record).encoded(key: key)
        var lines = String(decoding: current, as: UTF8.self).split(separator: "\n").map(String.init)
        lines[0] = "org.example.Downloads.ResumeData/2"
        let text = Array((lines[0] + "\n" + lines[1]).utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: text, using: key).map { String(format: "%02x", $0) }.joined()
        let old = text + Array("\nhmac-sha256:\(mac)\n".utf8)
        let data = try ResumeData.decode(old, key: key, owner: Self.owner)
        XCTAssertEqual(data.offset, 10)
        XCTAssertNil(data.segments)
        // Segments that do not describe the file are refused even with a valid HMAC.
        record.segments = [ByteRange(start: 50, end: 120)]
        record.durableOffset = 50
        let forged = try ResumeData(record: record).encoded(key: key)
        XCTAssertThrowsError(try ResumeData.decode(forged, key: key, owner: Self.owner)) { error in
            XCTAssertEqual((error as? DownloadError)?.name, "InvalidResumeData")
        }
    }

    func testAServerWithoutRangesOrLengthGetsOneStream() async throws {
        let content = Self.content(3 << 20)
        serve("/noranges", content) { $0.ranges = false }
        serve("/chunked", content) { $0.chunked = true }
        let a = try startSegmented("/noranges", connections: 4)
        let b = try startSegmented("/chunked", connections: 4)
        for id in [a, b] {
            try await assertFinished(id, holding: content)
        }
        XCTAssertEqual(server.requests(for: "/noranges").count, 1)
        XCTAssertEqual(server.requests(for: "/chunked").count, 1)
    }
}
