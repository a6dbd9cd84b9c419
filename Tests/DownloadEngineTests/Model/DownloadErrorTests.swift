@testable import DownloadModel
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
        XCTAssertEqual(
            DownloadError.checksumMismatch(
                expected: try Checksum(.md5, hex: String(repeating: "a", count: 32)), actual: "b"
            ).code, .checksumMismatch)
        XCTAssertEqual(Set([DownloadError.file("a"), DownloadError.file("b")]).count, 1)
        XCTAssertEqual(DownloadError.allNames.count, DownloadError.Code.allCases.count)
    }

    /// A refused or reset connection reads as the system says it, not as NIO's text for the
    /// call that met it ("connection reset (error set): Connection refused) (errno: 111)").
    func testAConnectionsFailureReadsAsTheSystemsReason() {
        let refused = DownloadError.classify(IOError(errnoCode: ECONNREFUSED, reason: "connection reset (error set)"))
        XCTAssertEqual(refused.code, .networkError)
        XCTAssertEqual(refused.message, "the connection failed: Connection refused (errno 111)")
        let reset = DownloadError.classify(IOError(errnoCode: ECONNRESET, reason: "read(descriptor:pointer:size:)"))
        XCTAssertEqual(reset.message, "the connection failed: Connection reset by peer (errno 104)")
    }
}
