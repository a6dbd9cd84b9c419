import LANShare
import XCTest

final class RangeRequestTests: XCTestCase {
    func testOneRangeOrTheWholeFile() {
        XCTAssertEqual(RangeRequest.parse(nil, size: 100), .whole)
        XCTAssertEqual(RangeRequest.parse("bytes=0-9", size: 100), .bytes(first: 0, last: 9))
        XCTAssertEqual(RangeRequest.parse("bytes=90-", size: 100), .bytes(first: 90, last: 99))
        XCTAssertEqual(RangeRequest.parse("bytes=90-500", size: 100), .bytes(first: 90, last: 99), "clamped")
        XCTAssertEqual(RangeRequest.parse("bytes=-10", size: 100), .bytes(first: 90, last: 99), "the last 10")
        XCTAssertEqual(RangeRequest.parse("bytes=-500", size: 100), .bytes(first: 0, last: 99))
        XCTAssertEqual(RangeRequest.parse("bytes=100-", size: 100), .unsatisfiable)
        XCTAssertEqual(RangeRequest.parse("bytes=-0", size: 100), .unsatisfiable)
        // What the server does not serve as asked is answered whole (RFC 9110 lets it ignore a Range).
        XCTAssertEqual(RangeRequest.parse("bytes=0-1,5-6", size: 100), .whole)
        XCTAssertEqual(RangeRequest.parse("items=0-1", size: 100), .whole)
        XCTAssertEqual(RangeRequest.parse("bytes=9-1", size: 100), .whole)
        XCTAssertEqual(RangeRequest.parse("bytes=x-1", size: 100), .whole)
    }
}
