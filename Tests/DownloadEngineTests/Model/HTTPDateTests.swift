import DownloadModel
import XCTest

/// HTTP's dates as Unix seconds: the IMF-fixdate both ways, the obsolete forms read, anything
/// else nil (a server's Last-Modified is its text, not ours).
final class HTTPDateTests: XCTestCase {
    func testTheIMFFixdateBothWays() {
        XCTAssertEqual(HTTPDate.text(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.seconds("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.text(0), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.text(253_402_300_799), "Fri, 31 Dec 9999 23:59:59 GMT")
        for seconds: Int64 in [0, 1, 86_399, 951_782_400, 1_700_000_000, 4_102_444_800] {
            XCTAssertEqual(HTTPDate.seconds(HTTPDate.text(seconds)), seconds)
        }
    }

    func testTheObsoleteFormsAreRead() {
        XCTAssertEqual(HTTPDate.seconds("Sunday, 06-Nov-94 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.seconds("Sun Nov  6 08:49:37 1994"), 784_111_777)
    }

    func testAnythingElseIsNil() {
        for text in [
            "", "yesterday", "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 19x4 08:49:37 GMT",
        ] {
            XCTAssertNil(HTTPDate.seconds(text), text)
        }
    }
}
