import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `expected_size` (the file's length as the caller knows it: apt's `Expected-Checksum-FileSize`):
/// a small file (at most 1 MiB) is short from its start, so many start at once on connections of
/// their own instead of one session's two waiting a round trip each for their heads; a server's
/// file of another length fails the task, at the head when it tells its length (nothing written),
/// else at the body's end. The daemon runs one transfer at a time, one a session.
final class ExpectedSizeTests: DaemonTestCase {
    override var extraArguments: [String] { ["--max-running", "1", "--max-running-per-session", "1"] }

    func testSmallFilesOfAKnownSizeAllStartWithoutWaitingForATransferPlace() async throws {
        let content = Self.content(1000, seed: 81)
        var held = Route(content: content)
        // Each answer held for longer than the test waits: one transfer at a time would have
        // asked for one file only.
        held.replyDelay = 60
        var tasks: [ObjectPath] = []
        for n in 0..<6 {
            http.set("/held\(n)", held)
            tasks.append(
                try await start(http.url("/held\(n)"), directory.file("held\(n)"), ["expected_size": .uint64(1000)]))
        }
        try await until("six requests sent at once") {
            (0..<6).allSatisfy { self.http.arrived("/held\($0)") == 1 }
        }
        for task in tasks {
            _ = try await client.call(
                destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task",
                method: "Cancel")
        }

        // Answered at once, every one of them right, with one transfer place.
        var quick: [(ObjectPath, String)] = []
        for n in 0..<6 {
            let bytes = Self.content(2000 + n, seed: UInt32(90 + n))
            http.set("/small\(n)", Route(content: bytes))
            quick.append(
                (
                    try await start(
                        http.url("/small\(n)"), directory.file("small\(n)"),
                        ["expected_size": .uint64(UInt64(2000 + n))]),
                    Self.sha256(bytes)
                ))
        }
        for (n, (task, sum)) in quick.enumerated() {
            try await waitState(task, ["finished"])
            XCTAssertEqual(sha256(ofFile: directory.file("small\(n)")), sum)
        }
    }

    func testAFileOfAnotherLengthFailsAndIsNotFetched() async throws {
        // A big file claimed small (a way round the transfer limits, were it taken): refused at
        // its head, nothing written.
        http.set("/big", Route(content: Self.content(4 << 20, seed: 82)))
        let big = try await start(http.url("/big"), directory.file("big"), ["expected_size": .uint64(1000)])
        try await waitState(big, ["failed"])
        let error = try await property(big, "Error")?.stringValue
        XCTAssertEqual(error, "org.example.Downloads.Error.InvalidResponse")
        let message = try await property(big, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(
            message.contains("the caller's expected_size promises 1000 bytes; the server's file has 4194304"), message)
        let written = try await property(big, "BytesWritten")?.int64Value
        XCTAssertEqual(written, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("big")))

        // A body with no length told (chunked): judged when it ends, not published.
        var chunked = Route(content: Self.content(5000, seed: 83))
        chunked.chunked = true
        http.set("/chunked", chunked)
        let told = try await start(http.url("/chunked"), directory.file("chunked"), ["expected_size": .uint64(4999)])
        try await waitState(told, ["failed"])
        let chunkedMessage = try await property(told, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(chunkedMessage.contains("promises 4999 bytes; the server's file has 5000"), chunkedMessage)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("chunked")))

        // Python's http.server as HTTP/1.0 (no Content-Length, the body to its close): the right
        // length finishes, a wrong one fails at the end.
        let server = try HTTP10Server(in: directory.path)
        defer { server.stop() }
        let url = server.url("/login/file").replacingOccurrences(of: "http://", with: "http://hal:9000@")
        let right = try await start(url, directory.file("from-1.0"), ["expected_size": .uint64(1 << 20)])
        try await waitState(right, ["finished"])
        XCTAssertEqual(
            sha256(ofFile: directory.file("from-1.0")),
            Self.sha256((0..<4096).flatMap { _ in (0...255).map { UInt8($0) } }))
        let wrong = try await start(url, directory.file("wrong-1.0"), ["expected_size": .uint64(1 << 19)])
        try await waitState(wrong, ["failed"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("wrong-1.0")))
    }

    func testABadExpectedSizeIsRefusedWithAReason() async throws {
        let cases: [(DBusValue, String)] = [
            (.int64(1000), "t (bytes)"),
            (.string("1000"), "t (bytes)"),
            (.uint64(UInt64.max), "more bytes than any file has"),
        ]
        for (value, words) in cases {
            do {
                _ = try await start(http.url("/x"), directory.file("bad"), ["expected_size": value])
                XCTFail("expected_size \(value) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
                XCTAssertTrue(error.message.contains(words), "\(error)")
            }
        }
    }
}
