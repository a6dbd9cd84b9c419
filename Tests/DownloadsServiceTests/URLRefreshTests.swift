import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// A link that expires mid-download (a signed URL answering 403 once its time is up) and a fresh
/// one given with `SetURL` or `ResumeWithData(…, {url})`: the bytes already fetched are kept when
/// the new URL serves the same entity, and the download starts over when it does not.
final class URLRefreshTests: DaemonTestCase {
    /// `/signed/<token>/file.iso`: the same file under two tokens, `old` expiring after `cut` bytes.
    func signedRoutes(_ content: [UInt8], cut: Int, old: String = "old") {
        var expiring = Route(content: content)
        expiring.bytesPerSecond = 1_000_000
        expiring.closeAfter = cut
        expiring.misbehaveTimes = 1
        expiring.failAfter = (count: 1, status: 403)
        http.set("/signed/\(old)/file.iso", expiring)
        http.set("/signed/fresh/file.iso", Route(content: content))
    }

    /// The task's `Failed` signal, waited for: the `State` property says failed as soon as the
    /// engine knows, the signal follows once the store has the failure.
    func failed(_ path: ObjectPath) async throws -> [DBusValue] {
        try await waitState(path, ["failed"])
        func signal() -> [DBusValue]? {
            signals.withLockedValue { $0 }.last { $0.0 == "Failed" && $0.1.first?.objectPathValue == path }?.1
        }
        try await until("the Failed signal") { signal() != nil }
        return try XCTUnwrap(signal())
    }

    func testSetURLAfterTheLinkExpiredKeepsEveryByteFetched() async throws {
        let content = Self.content(1_500_000, seed: 21)
        signedRoutes(content, cut: 600_000)
        let changes = NIOLockedValueBox([[String: DBusValue]]())
        try await client.subscribe(MatchRule(interface: "org.freedesktop.DBus.Properties")) { message in
            guard let arguments = try? message.arguments(), arguments.count > 1, let changed = arguments[1].vardictValue
            else { return }
            changes.withLockedValue { $0.append(changed.mapValues { $0.variantValue ?? $0 }) }
        }
        let target = directory.file("file.iso")
        let task = try await start(http.url("/signed/old/file.iso"), target)
        let failure = try await failed(task)
        XCTAssertEqual(failure[1].stringValue, "org.example.Downloads.Error.HTTPError")
        XCTAssertTrue(failure[2].stringValue?.contains("403") == true, "\(failure)")
        XCTAssertFalse(failure[3].bytesValue?.isEmpty ?? true, "a failed download with bytes offers resume data")

        let fresh = http.url("/signed/fresh/file.iso")
        let reply = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: "SetURL",
            arguments: [.string(fresh)]
        )
        XCTAssertTrue(reply.isEmpty)
        let url = try await property(task, "URL")
        XCTAssertEqual(url?.stringValue, fresh)
        try await until("PropertiesChanged says the URL changed") {
            changes.withLockedValue { $0 }.contains { $0["URL"]?.stringValue == fresh }
        }
        let stillFailed = try await waitState(task, ["failed"])
        XCTAssertEqual(stillFailed, "failed", "SetURL does not resume by itself")
        _ = try await call("Resume", [.objectPath(task)])
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let old = http.requests(for: "/signed/old/file.iso"), new = http.requests(for: "/signed/fresh/file.iso")
        XCTAssertEqual(old.map(\.status), [200, 403], "cut once, then expired")
        XCTAssertEqual(new.count, 1)
        XCTAssertEqual(new.first?.range, "bytes=600000-", "the new URL from the durable offset")
        XCTAssertEqual(new.first?.ifRange, "\"v1\"", "with the validator recorded from the old URL")
        XCTAssertEqual((old + new).map(\.bodyBytesSent).reduce(0, +), content.count, "no byte fetched twice")
        // The URL is stored: a restart keeps it.
        stopDaemon()
        try await startDaemon()
        let again = try await property(task, "URL")
        XCTAssertEqual(again?.stringValue, fresh)
    }

    func testResumeWithDataAtANewURLAndAnotherEntityStartsOver() async throws {
        let content = Self.content(1_200_000, seed: 22)
        signedRoutes(content, cut: 500_000)
        let task = try await start(http.url("/signed/old/file.iso"), directory.file("a.iso"))
        let failure = try await failed(task)
        let blob = try XCTUnwrap(failure[3].bytesValue)
        let fresh = http.url("/signed/fresh/file.iso")
        let reply = try await call("ResumeWithData", [.bytes(blob), .vardict(["url": .string(fresh)])])
        XCTAssertEqual(reply.first?.objectPathValue, task, "the failed task itself carries on")
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("a.iso")), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/signed/fresh/file.iso").first?.range, "bytes=500000-")

        // Another file behind the new URL (another ETag): If-Range gets the whole of it, from zero.
        let other = Self.content(700_000, seed: 23)
        signedRoutes(content, cut: 400_000, old: "old2")
        var replaced = Route(content: other)
        replaced.etag = "\"v2\""
        http.set("/elsewhere/file.iso", replaced)
        let second = try await start(http.url("/signed/old2/file.iso"), directory.file("b.iso"))
        _ = try await failed(second)
        _ = try await client.call(
            destination: "org.example.Downloads", path: second, interface: "org.example.Downloads.Task",
            method: "SetURL",
            arguments: [.string(http.url("/elsewhere/file.iso"))]
        )
        _ = try await call("Resume", [.objectPath(second)])
        try await waitState(second, ["finished"])
        XCTAssertEqual(
            sha256(ofFile: directory.file("b.iso")), Self.sha256(other), "the new entity whole, never a splice")
        let elsewhere = http.requests(for: "/elsewhere/file.iso")
        XCTAssertEqual(elsewhere.first?.ifRange, "\"v1\"")
        XCTAssertEqual(elsewhere.first?.range, "bytes=400000-")
        XCTAssertEqual(elsewhere.first?.status, 200, "the validator did not match: the whole file")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        let id = DownloadsAPI.taskID(second).map(String.init) ?? ""
        XCTAssertTrue(
            log.contains("task \(id): the server sent the whole file (200) instead of the rest from byte 400000"), log)
    }

    func testSetURLIsRefusedWhileRunningOrFinishedAndChecksTheURL() async throws {
        let content = Self.content(2_000_000, seed: 24)
        var slow = Route(content: content)
        slow.bytesPerSecond = 500_000
        http.set("/slow", slow)
        http.set("/fast", Route(content: Self.content(1000)))
        let running = try await start(http.url("/slow"), directory.file("slow"))
        try await waitBytes(running, atLeast: 100_000)
        func setURL(_ path: ObjectPath, _ url: String) async -> String? {
            do {
                _ = try await client.call(
                    destination: "org.example.Downloads", path: path, interface: "org.example.Downloads.Task",
                    method: "SetURL",
                    arguments: [.string(url)]
                )
                return nil
            } catch let error as BusError {
                return error.name
            } catch {
                return "\(error)"
            }
        }
        var name = await setURL(running, http.url("/fast"))
        XCTAssertEqual(name, "org.example.Downloads.Error.WrongState", "a running task")
        let finished = try await start(http.url("/fast"), directory.file("fast"))
        try await waitState(finished, ["finished"])
        name = await setURL(finished, http.url("/slow"))
        XCTAssertEqual(name, "org.example.Downloads.Error.WrongState", "a finished task")
        _ = try await call("Pause", [.objectPath(running)])
        name = await setURL(running, "ftp://example.org/file")
        XCTAssertEqual(name, "org.example.Downloads.Error.InvalidArgument")
        name = await setURL(running, "not a url")
        XCTAssertEqual(name, "org.example.Downloads.Error.InvalidArgument")
        do {
            _ = try await start(http.url("/fast"), directory.file("x"), ["url": .string(http.url("/slow"))])
            XCTFail("Start took a url option")
        } catch let error as BusError {
            XCTAssertEqual(
                error.name, "org.example.Downloads.Error.InvalidArgument", "url is an option of ResumeWithData only")
        }
    }

    func testDownloadsctlResumeWithANewURL() async throws {
        let content = Self.content(900_000, seed: 25)
        signedRoutes(content, cut: 300_000)
        let task = try await start(http.url("/signed/old/file.iso"), directory.file("ctl.iso"))
        _ = try await failed(task)
        let ctl = PackageRoot.debugBinary("downloadsctl")
        let id = String(task.rawValue.split(separator: "/").last ?? "")
        let out = try await run([
            ctl, "--address", bus.address, "resume", id, "--url", http.url("/signed/fresh/file.iso"),
        ])
        XCTAssertEqual(out.status, 0, out.description)
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("ctl.iso")), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/signed/fresh/file.iso").first?.range, "bytes=300000-")
    }

    func testASegmentedDownloadCarriesOnAtTheNewURLRangeByRange() async throws {
        let content = Self.content(6 << 20, seed: 26)
        var old = Route(content: content)
        old.bytesPerSecond = 1_500_000
        http.set("/old/big.bin", old)
        http.set("/fresh/big.bin", Route(content: content))
        let task = try await start(http.url("/old/big.bin"), directory.file("big.bin"), ["connections": .uint32(4)])
        try await waitBytes(task, atLeast: 2 << 20)
        _ = try await call("Pause", [.objectPath(task)])
        let held = try await property(task, "BytesWritten")?.int64Value ?? 0
        _ = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: "SetURL",
            arguments: [.string(http.url("/fresh/big.bin"))]
        )
        _ = try await call("Resume", [.objectPath(task)])
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("big.bin")), Self.sha256(content))
        let fresh = http.requests(for: "/fresh/big.bin")
        XCTAssertGreaterThan(fresh.count, 1, "the remaining ranges, each from the new URL")
        XCTAssertTrue(fresh.allSatisfy { $0.ifRange == "\"v1\"" && $0.status == 206 }, "\(fresh)")
        XCTAssertFalse(
            fresh.contains { $0.range?.hasPrefix("bytes=0-") == true }, "nothing fetched again from the start")
        XCTAssertLessThanOrEqual(
            fresh.map(\.bodyBytesSent).reduce(0, +), content.count - Int(held) + (1 << 20),
            "about what was missing when it paused")
    }
}
