import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `if_modified_since` and `if_none_match` (v1.5): a download that asks for the file only if it
/// changed, as `curl -z` and apt's http method do. The server's 304 finishes the task with
/// `ResponseStatus` 304 and the caller's file as it was; a changed file comes whole, with its
/// `Last-Modified` as `LastModified`. A server that answers 304 to a request that asked nothing
/// is not taken at its word, and nothing conditional goes with a range.
final class ConditionalDownloadTests: DaemonTestCase {
    let modified = Date(timeIntervalSince1970: 1_700_000_000)

    /// Asserts that `task`'s property `name`, read through `read`, is `expected`.
    func expect<T: Equatable>(
        _ task: ObjectPath, _ name: String, _ read: KeyPath<DBusValue, T?>, _ expected: T,
        line: UInt = #line
    ) async throws {
        let found = try await property(task, name)?[keyPath: read]
        XCTAssertEqual(found, expected, name, line: line)
    }

    func testUnchangedSinceTheCallersCopyFinishesWith304AndTheFileUntouched() async throws {
        let content = Self.content(300_000, seed: 71)
        var route = Route(content: content)
        route.lastModified = modified
        http.set("/Release", route)
        let file = directory.file("Release")
        try Data("the copy the caller has\n".utf8).write(to: URL(fileURLWithPath: file))
        let task = try await start(
            http.url("/Release"), file, ["if_modified_since": .int64(1_700_000_000), "overwrite": .boolean(true)])
        try await waitState(task, ["finished"])
        try await expect(task, "ResponseStatus", \.uint32Value, 304)
        try await expect(task, "BytesWritten", \.int64Value, 0)
        XCTAssertEqual(try String(contentsOfFile: file, encoding: .utf8), "the copy the caller has\n")
        let sent = http.requests(for: "/Release")
        XCTAssertEqual(sent.map(\.status), [304])
        XCTAssertEqual(sent.first?.userHeaders["if-modified-since"], "Tue, 14 Nov 2023 22:13:20 GMT")
        // No partial file is left beside it.
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".part") }
        XCTAssertEqual(left, [])
    }

    func testAChangedFileComesWholeWithItsLastModified() async throws {
        let content = Self.content(300_000, seed: 72)
        var route = Route(content: content)
        route.lastModified = modified
        http.set("/Packages", route)
        let file = directory.file("Packages")
        let task = try await start(http.url("/Packages"), file, ["if_modified_since": .int64(1_600_000_000)])
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(content))
        try await expect(task, "ResponseStatus", \.uint32Value, 200)
        try await expect(task, "LastModified", \.int64Value, 1_700_000_000)
        // A download with no conditions says its status and Last-Modified too.
        let plain = try await start(http.url("/Packages"), directory.file("again"))
        try await waitState(plain, ["finished"])
        try await expect(plain, "ResponseStatus", \.uint32Value, 200)
        try await expect(plain, "LastModified", \.int64Value, 1_700_000_000)
        XCTAssertNil(http.requests(for: "/Packages").last?.userHeaders["if-modified-since"])
    }

    /// apt's case: the file it names, handed over by descriptor and written in place
    /// (`StartAt`), keeps its bytes when the ETag still matches.
    func testAFileWrittenInPlaceKeepsItsBytesOnAMatchingETag() async throws {
        let content = Self.content(200_000, seed: 73)
        var route = Route(content: content)
        route.etag = "\"index-7\""
        http.set("/InRelease", route)
        let file = directory.file("InRelease")
        let old = Self.content(500_000, seed: 74)
        try Data(old).write(to: URL(fileURLWithPath: file))
        let fd = open(file, O_WRONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let reply = try await call(
            "StartAt",
            [
                .string(http.url("/InRelease")), .unixFD(UnixFD(owning: fd)), .string(""),
                .vardict(["if_none_match": .string("\"index-6\", \"index-7\"")]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await waitState(task, ["finished"])
        try await expect(task, "ResponseStatus", \.uint32Value, 304)
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(old), "not a byte of the caller's file changed")
        XCTAssertEqual(http.requests(for: "/InRelease").first?.userHeaders["if-none-match"], "\"index-6\", \"index-7\"")

        // A new version: the same file, now the new bytes and no longer (truncated to their length).
        route.etag = "\"index-8\""
        http.set("/InRelease", route)
        let again = open(file, O_WRONLY | O_CLOEXEC)
        let secondReply = try await call(
            "StartAt",
            [
                .string(http.url("/InRelease")), .unixFD(UnixFD(owning: again)), .string(""),
                .vardict(["if_none_match": .string("\"index-7\"")]),
            ])
        let second = try XCTUnwrap(secondReply.first?.objectPathValue)
        try await waitState(second, ["finished"])
        try await expect(second, "ResponseStatus", \.uint32Value, 200)
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(content))
    }

    /// A hostile server's 304 to a request that asked nothing conditional is an error, not a
    /// finished download of nothing; a plain HTTP/1.0 server that knows no conditions sends the file.
    func testA304ToAnUnconditionalRequestFailsAndAnHTTP10ServerSendsTheFile() async throws {
        var route = Route(content: Self.content(10_000, seed: 75))
        route.alwaysNotModified = true
        http.set("/liar", route)
        let lied = try await start(http.url("/liar"), directory.file("liar"))
        try await waitState(lied, ["failed"])
        try await expect(lied, "Error", \.stringValue, "org.example.Downloads.Error.InvalidResponse")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("liar")))

        // Python's http.server as HTTP/1.0: no conditions known, the body to its close.
        let server = try HTTP10Server(in: directory.path)
        defer { server.stop() }
        let big = (0..<4096).flatMap { _ in (0...255).map { UInt8($0) } }
        let url = server.url("/login/file").replacingOccurrences(of: "http://", with: "http://hal:9000@")
        let task = try await start(
            url, directory.file("from-1.0"), ["if_modified_since": .int64(Int64(Date().timeIntervalSince1970))])
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("from-1.0")), Self.sha256(big))
        try await expect(task, "ResponseStatus", \.uint32Value, 200)
        try await expect(task, "LastModified", \.int64Value, 0)
    }

    func testBadConditionsAreRefusedWithAReason() async throws {
        let url = http.url("/x")
        let cases: [(String, DBusValue, String)] = [
            ("if_modified_since", .int64(-1), "1970"),
            ("if_modified_since", .uint64(5), "x (Unix seconds)"),
            ("if_none_match", .string("\"a\"\r\nX-Injected: 1"), "entity tags"),
            ("if_none_match", .string(""), "entity tags"),
        ]
        for (key, value, words) in cases {
            do {
                _ = try await start(url, directory.file("bad"), [key: value])
                XCTFail("\(key) \(value) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
                XCTAssertTrue(error.message.contains(words), "\(error)")
            }
        }
        // A group's files are published together: none is conditional.
        do {
            _ = try await call(
                "StartGroup",
                [
                    .array(
                        element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
                        [.structure([.string(url), .string(directory.file("g")), .vardict([:])])]),
                    .vardict(["if_modified_since": .int64(1)]),
                ])
            XCTFail("a conditional group was taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
        }
        // The headers themselves are the service's to send, from the file's start only.
        do {
            _ = try await start(url, directory.file("bad"), ["headers": .stringDict(["If-None-Match": "\"a\""])])
            XCTFail("If-None-Match taken as a caller's header")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
        }
    }
}
