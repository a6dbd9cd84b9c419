@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// Content-Range, validators and file names from a server.
final class HTTPHeaderRulesTests: XCTestCase {
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
            HTTPHeaderRules.strongValidator([
                "Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT", "Date": "Tue, 14 Nov 2023 22:13:21 GMT",
            ]),
            "Tue, 14 Nov 2023 22:13:20 GMT"
        )
        XCTAssertNil(
            HTTPHeaderRules.strongValidator([
                "Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT", "Date": "Tue, 14 Nov 2023 22:13:20 GMT",
            ]))
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
        XCTAssertEqual(
            HTTPHeaderRules.fileName(contentDisposition: nil, url: "http://h/a/%1B%5B2J%C2%9Bx.bin"), "_[2J_x.bin")
        // Bidi overrides and isolates, marks and other format characters.
        for spoof in [
            "invoice%E2%80%AEfdp.exe", "invoice%E2%80%8Ffdp.exe", "invoice%E2%81%A6fdp.exe", "invoice%E2%80%8Bfdp.exe",
        ] {
            XCTAssertEqual(
                HTTPHeaderRules.fileName(
                    contentDisposition: "attachment; filename*=UTF-8''\(spoof)", url: "http://h/x"),
                "invoice_fdp.exe", spoof)
        }
        XCTAssertEqual(HTTPHeaderRules.sanitize("a\u{85}b\u{2028}c\u{2029}d"), "a_b_c_d")
        XCTAssertEqual(HTTPHeaderRules.sanitize("Ünïcödé 文件 🎉.txt"), "Ünïcödé 文件 🎉.txt")
        // Within NAME_MAX including " (999)", keeping the extension; whole characters only.
        let long = String(repeating: "é", count: 200) + ".tar.gz"
        let kept = try XCTUnwrap(HTTPHeaderRules.sanitize(long))
        XCTAssertLessThanOrEqual(kept.utf8.count, HTTPHeaderRules.maximumNameBytes)
        XCTAssertTrue(kept.hasSuffix("é.gz") || kept.hasSuffix("é.tar.gz"), kept)
        XCTAssertEqual(
            HTTPHeaderRules.sanitize(String(repeating: "a", count: 300)),
            String(repeating: "a", count: HTTPHeaderRules.maximumNameBytes))
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
}
