@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// What a response head decides (RFC 9110 resume rules): one test per rule.
final class ResponseDecisionTests: XCTestCase {
    private func decide(
        _ status: Int, _ headers: HTTPHeaders, offset: Int64 = 100, known: Int64 = 1000, segment: Bool = false
    ) -> ResponseDecision {
        ResponseDecision.decide(
            status: status, reason: "", headers: headers, requestedOffset: offset,
            knownLength: known, validator: "\"v\"", retryAfterCap: 60, ranged: offset > 0 || segment,
            segment: segment)
    }

    private func isRestart(_ decision: ResponseDecision, file: StaticString = #filePath, line: UInt = #line) {
        guard case .restartFromZero = decision else { return XCTFail("\(decision)", file: file, line: line) }
    }

    /// A 304 finishes only a conditional request from the start; to anything else it is the
    /// server's error (never a finished download of nothing).
    func testA304IsNotModifiedOnlyForAConditionalRequestFromTheStart() {
        func decide304(conditional: Bool, ranged: Bool) -> ResponseDecision {
            ResponseDecision.decide(
                status: 304, reason: "Not Modified", headers: [:], requestedOffset: ranged ? 100 : 0, knownLength: -1,
                validator: nil, retryAfterCap: 60, ranged: ranged, conditional: conditional)
        }
        XCTAssertEqual(decide304(conditional: true, ranged: false), .notModified)
        guard case .fail(let error) = decide304(conditional: false, ranged: false) else { return XCTFail() }
        XCTAssertEqual(error.code, .invalidResponse)
        guard case .fail = decide304(conditional: true, ranged: true) else { return XCTFail() }
    }

    /// A promised length (`expected_size`, a Metalink `<size>`) is held against the length a head
    /// tells: another fails before any byte is written (a wrong one never fetches a whole file
    /// outside the transfer limits); a head that tells none is judged at the end.
    func testALengthOtherThanThePromisedOneFailsAtTheHead() {
        let promise = LengthPromise(length: 1000, by: "the caller's expected_size")
        func decide(_ status: Int, _ headers: HTTPHeaders, offset: Int64 = 0) -> ResponseDecision {
            ResponseDecision.decide(
                status: status, reason: "", headers: headers, requestedOffset: offset, knownLength: -1, validator: nil,
                retryAfterCap: 60, ranged: offset > 0, promise: promise)
        }
        guard case .fail(let error) = decide(200, ["Content-Length": "4194304"]) else { return XCTFail() }
        XCTAssertEqual(error.code, .invalidResponse)
        XCTAssertEqual(error.message, "the caller's expected_size promises 1000 bytes; the server's file has 4194304")
        guard case .fail = decide(206, ["Content-Range": "bytes 100-1000/1001"], offset: 100) else { return XCTFail() }
        XCTAssertEqual(
            decide(200, ["Content-Length": "1000"]),
            .write(offset: 0, truncate: true, expectedLength: 1000, validator: nil))
        XCTAssertEqual(
            decide(206, ["Content-Range": "bytes 100-999/1000"], offset: 100),
            .write(offset: 100, truncate: false, expectedLength: 1000, validator: nil))
        // No length told (chunked): written, and judged once the body ends.
        XCTAssertEqual(decide(200, [:]), .write(offset: 0, truncate: true, expectedLength: -1, validator: nil))
        // What is not a write is not judged by it.
        guard case .fail = decide(404, ["Content-Length": "9"]) else { return XCTFail() }
    }

    func testAResumeAnsweredWithItsRangeWritesFromTheOffset() {
        XCTAssertEqual(
            decide(206, ["Content-Range": "bytes 100-999/1000"]),
            .write(offset: 100, truncate: false, expectedLength: 1000, validator: "\"v\""))
        XCTAssertEqual(
            decide(206, ["Content-Range": "bytes 100-199/1000"], segment: true),
            .write(offset: 100, truncate: false, expectedLength: 1000, validator: "\"v\""))
    }

    func testA200ToOneStreamsRangeIsANewVersionWrittenFromZero() {
        XCTAssertEqual(
            decide(200, ["Content-Length": "5", "ETag": "\"n\""]),
            .write(offset: 0, truncate: true, expectedLength: 5, validator: "\"n\""))
        XCTAssertEqual(
            decide(200, [:], offset: 0), .write(offset: 0, truncate: true, expectedLength: -1, validator: nil))
    }

    func testAWholeMetalinkDocumentIsFollowedOnlyFromTheStartAndWhenAsked() {
        func decide(_ type: String, offset: Int64 = 0, follows: Bool = true, segment: Bool = false) -> ResponseDecision
        {
            ResponseDecision.decide(
                status: 200, reason: "", headers: ["Content-Type": type], requestedOffset: offset,
                knownLength: -1, validator: nil, retryAfterCap: 60, ranged: offset > 0 || segment,
                segment: segment, followsMetalink: follows)
        }
        XCTAssertEqual(decide("application/metalink4+xml"), .metalink)
        XCTAssertEqual(decide("Application/Metalink4+XML; charset=utf-8"), .metalink)
        XCTAssertEqual(
            decide("application/metalink4+xml", follows: false),
            .write(offset: 0, truncate: true, expectedLength: -1, validator: nil))
        XCTAssertEqual(
            decide("application/metalink4+xml", offset: 100),
            .write(offset: 0, truncate: true, expectedLength: -1, validator: nil),
            "a new version of a resumed download is written")
        isRestart(decide("application/metalink4+xml", segment: true))
        XCTAssertEqual(decide("application/xml"), .write(offset: 0, truncate: true, expectedLength: -1, validator: nil))
    }

    func testA200ToARangeOfASegmentedDownloadRestartsFromZero() {
        XCTAssertEqual(
            decide(200, ["Content-Length": "1000"], segment: true),
            .restartFromZero(reason: "200 to the ranged request for bytes 100-"))
        XCTAssertEqual(
            decide(200, ["Content-Length": "1000"], offset: 0, segment: true),
            .restartFromZero(reason: "200 to the ranged request for bytes 0-"))
    }

    func testAContentRangeThatDoesNotStartWhereAskedRestarts() {
        XCTAssertEqual(
            decide(206, ["Content-Range": "bytes 0-999/1000"]),
            .restartFromZero(reason: "206 starting at 0, asked for 100"))
        isRestart(decide(206, ["Content-Range": "nonsense"]))
        isRestart(decide(206, [:]))
        isRestart(decide(206, ["Content-Range": "bytes 0-999/1000"], offset: 0))  // a 206 to a request without a range
        isRestart(decide(206, ["Content-Range": "bytes 100-999/1000", "Content-Length": "10"]))
    }

    func testAResourceWhoseLengthChangedRestarts() {
        isRestart(decide(206, ["Content-Range": "bytes 100-1999/2000"]))
        isRestart(decide(206, ["Content-Range": "bytes 100-199/2000"], segment: true))
        XCTAssertEqual(
            decide(206, ["Content-Range": "bytes 100-1999/2000"], known: -1),
            .write(offset: 100, truncate: false, expectedLength: 2000, validator: "\"v\""), "unknown before")
    }

    func testADifferentValidatorRestarts() {
        isRestart(decide(206, ["Content-Range": "bytes 100-999/1000", "ETag": "\"other\""]))
        isRestart(decide(206, ["Content-Range": "bytes 100-199/1000", "ETag": "\"other\""], segment: true))
        XCTAssertEqual(
            decide(206, ["Content-Range": "bytes 100-999/1000", "ETag": "\"v\""]),
            .write(offset: 100, truncate: false, expectedLength: 1000, validator: "\"v\""))
    }

    func test416AtTheEndOfWhatIsHeldIsCompleteAndElsewhereRestarts() {
        XCTAssertEqual(decide(416, ["Content-Range": "bytes */1000"], offset: 1000), .alreadyComplete)
        isRestart(decide(416, ["Content-Range": "bytes */900"], offset: 1000))
        isRestart(decide(416, [:], offset: 1000))
    }

    func testRedirectsAndErrorStatuses() {
        XCTAssertEqual(decide(302, ["Location": "/x"]), .redirect("/x"))
        if case .fail = decide(302, [:]) {} else { XCTFail("a redirect without a Location") }
        if case .fail(let error) = decide(503, ["Retry-After": "7"]) {
            XCTAssertTrue(error.isRetryable)
            XCTAssertEqual(error.retryAfter, 7)
        } else {
            XCTFail("503")
        }
        if case .fail(let error) = decide(403, [:]) { XCTAssertFalse(error.isRetryable) } else { XCTFail("403") }
        if case .fail(let error) = decide(429, [:]) { XCTAssertTrue(error.isRetryable) } else { XCTFail("429") }
        if case .fail(let error) = decide(101, [:]) {
            XCTAssertEqual(error.code, .invalidResponse)
        } else {
            XCTFail("101")
        }
    }

    func testOnlyAWholeKnownValidatedRangeableBodyWithTwoRangesLeftSplits() {
        let mib: Int64 = 1 << 20
        let write = ResponseDecision.write(offset: 0, truncate: false, expectedLength: 8 * mib, validator: "\"v\"")
        let ranges: HTTPHeaders = ["Accept-Ranges": "bytes"]
        XCTAssertEqual(
            write.rangeToSplit(status: 200, headers: ranges, minimumSegment: mib), ByteRange(start: 0, end: 8 * mib))
        XCTAssertEqual(
            write.rangeToSplit(status: 206, headers: [:], minimumSegment: mib), ByteRange(start: 0, end: 8 * mib),
            "a 206 shows ranges work")
        let resumed = ResponseDecision.write(
            offset: 6 * mib, truncate: false, expectedLength: 8 * mib, validator: "\"v\"")
        XCTAssertEqual(
            resumed.rangeToSplit(status: 206, headers: [:], minimumSegment: mib),
            ByteRange(start: 6 * mib, end: 8 * mib), "what is left")
        XCTAssertNil(
            resumed.rangeToSplit(status: 206, headers: [:], minimumSegment: 2 * mib), "less than two ranges left")
        XCTAssertNil(
            write.rangeToSplit(status: 200, headers: [:], minimumSegment: mib), "no sign the server takes ranges")
        XCTAssertNil(write.rangeToSplit(status: 200, headers: ["Accept-Ranges": "none"], minimumSegment: mib))
        let unvalidated = ResponseDecision.write(offset: 0, truncate: false, expectedLength: 8 * mib, validator: nil)
        XCTAssertNil(
            unvalidated.rangeToSplit(status: 200, headers: ranges, minimumSegment: mib),
            "ranges of another version could splice")
        let unknown = ResponseDecision.write(offset: 0, truncate: false, expectedLength: -1, validator: "\"v\"")
        XCTAssertNil(unknown.rangeToSplit(status: 200, headers: ranges, minimumSegment: mib), "no length to split")
        XCTAssertNil(ResponseDecision.metalink.rangeToSplit(status: 200, headers: ranges, minimumSegment: mib))
        XCTAssertNil(ResponseDecision.redirect("/x").rangeToSplit(status: 302, headers: ranges, minimumSegment: mib))
    }
}
