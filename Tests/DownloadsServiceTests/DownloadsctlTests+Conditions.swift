import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `downloadsctl get -z` (curl's `-z`) and `--if-none-match`: the file fetched only when the
/// server's is newer than a file's time or a date, or its tag differs; unchanged, nothing written.
extension DownloadsctlTests {
    func testGetWithIfModifiedSinceFetchesOnlyANewerFile() async throws {
        let old = Self.content(300_000, seed: 501)
        var route = Route(content: old)
        route.lastModified = Date(timeIntervalSince1970: 1_700_000_000)
        http.set("/page", route)
        let file = directory.file("page.bin")

        // No file yet: no condition, the file fetched (as curl's -z does).
        let first = try await ctl(["get", "-z", file, http.url("/page"), "-o", file])
        XCTAssertEqual(first.status, 0, first.description)
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(old))
        XCTAssertNil(http.requests(for: "/page").last?.userHeaders["if-modified-since"])

        // The file is newer than the server's: a 304, nothing written, said so; the path printed.
        var times = [timeval(tv_sec: 1_750_000_000, tv_usec: 0), timeval(tv_sec: 1_750_000_000, tv_usec: 0)]
        utimes(file, &times)
        let second = try await ctl(["get", "-z", file, http.url("/page"), "-o", file])
        XCTAssertEqual(second.status, 0, second.description)
        XCTAssertEqual(second.stdout, file + "\n")
        XCTAssertTrue(second.stderr.contains("not modified"), second.stderr)
        XCTAssertEqual(
            http.requests(for: "/page").last?.userHeaders["if-modified-since"],
            "Sun, 15 Jun 2025 15:06:40 GMT")
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(old))
        var info = stat()
        XCTAssertEqual(stat(file, &info), 0)
        XCTAssertEqual(info.st_mtim.tv_sec, 1_750_000_000, "the file is untouched")

        // The server's changed since: the file named by -z is replaced (no --overwrite needed).
        let new = Self.content(200_000, seed: 502)
        route.content = new
        route.lastModified = Date(timeIntervalSince1970: 1_760_000_000)
        route.etag = "\"v2\""
        http.set("/page", route)
        let third = try await ctl(["get", "-z", file, http.url("/page"), "-o", file])
        XCTAssertEqual(third.status, 0, third.description)
        XCTAssertEqual(sha256(ofFile: file), Self.sha256(new))

        // A date; the tag the server has.
        let dated = try await ctl(["get", "-z", "2026-01-01", http.url("/page"), "-o", directory.file("dated.bin")])
        XCTAssertEqual(dated.status, 0, dated.description)
        XCTAssertTrue(dated.stderr.contains("not modified"), dated.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("dated.bin")), "nothing made")
        let tagged = try await ctl([
            "get", "--if-none-match", "\"v2\"", http.url("/page"), "-o", directory.file("tagged.bin"),
        ])
        XCTAssertEqual(tagged.status, 0, tagged.description)
        XCTAssertTrue(tagged.stderr.contains("not modified"), tagged.stderr)
        let otherTag = try await ctl([
            "get", "--if-none-match", "\"v1\"", http.url("/page"), "-o", directory.file("tagged.bin"),
        ])
        XCTAssertEqual(otherTag.status, 0, otherTag.description)
        XCTAssertEqual(sha256(ofFile: directory.file("tagged.bin")), Self.sha256(new))

        // Refused before anything is asked: a date that is none, a condition for several files.
        let bad = try await ctl(["get", "-z", "2026-13-45", http.url("/page"), "-o", directory.file("x")])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("neither a file nor a date"), bad.stderr)
        let several = try await ctl(["get", "-z", file, http.url("/page"), http.url("/page"), "-o", directory.path])
        XCTAssertNotEqual(several.status, 0)
        XCTAssertTrue(several.stderr.contains("ask about one file"), several.stderr)
    }
}
