@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// Errors and their codes.
final class DownloadErrorTests: XCTestCase {
    /// Errors compare by code, as AsyncHTTPClient's do: the message says more about the same error.
    func testDownloadErrorsCompareByCode() throws {
        XCTAssertEqual(DownloadError.network("reset"), DownloadError.network("refused"))
        XCTAssertNotEqual(DownloadError.network("x"), DownloadError.timeout("x"))
        XCTAssertEqual(DownloadError.checksumMismatch(expected: try Checksum(.md5, hex: String(repeating: "a", count: 32)), actual: "b").code, .checksumMismatch)
        XCTAssertEqual(Set([DownloadError.file("a"), DownloadError.file("b")]).count, 1)
        XCTAssertEqual(DownloadError.allNames.count, DownloadError.Code.allCases.count)
    }
}
