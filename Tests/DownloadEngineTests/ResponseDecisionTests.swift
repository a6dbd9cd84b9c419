@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// What a response head decides (RFC 9110 resume rules).
final class ResponseDecisionTests: XCTestCase {
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
}
