import DownloadModel
import XCTest

/// RFC 9110's field names, values and media types.
final class HTTPFieldRulesTests: XCTestCase {
    func testTokens() {
        XCTAssertTrue(HTTPFieldRules.isToken("Idempotency-Key"))
        XCTAssertTrue(HTTPFieldRules.isToken("x!#$%&'*+-.^_`|~9"))
        for name in ["", "a b", "a:b", "a(b)", "a/b", "a@b", "é", "a\"b", "a{b}"] {
            XCTAssertFalse(HTTPFieldRules.isToken(name), name)
        }
    }

    func testFieldValuesRefuseEveryControlButTab() {
        XCTAssertTrue(HTTPFieldRules.isFieldValue("Bearer abc.def\t x"))
        XCTAssertTrue(HTTPFieldRules.isFieldValue("café ☕"))
        XCTAssertTrue(HTTPFieldRules.isFieldValue(""))
        for scalar: UInt32 in [0, 0x0A, 0x0B, 0x0D, 0x1B, 0x7F, 0x80, 0x85, 0x9F, 0x2028, 0x2029] {
            let text = "a" + String(Unicode.Scalar(scalar)!) + "b"
            XCTAssertFalse(HTTPFieldRules.isFieldValue(text), String(scalar, radix: 16))
        }
    }

    func testMediaTypes() {
        for good in [
            "text/plain", "application/vnd.api+json", "text/plain; charset=utf-8", "text/plain;charset=\"utf-8\"",
            "multipart/form-data; boundary=\"a;b\"", "a/b; x=\"q\\\"uoted\"", "image/jpeg ",
        ] {
            XCTAssertTrue(HTTPFieldRules.isMediaType(good), good)
        }
        for bad in [
            "", "text", "text/", "/plain", "text/plain/x", "text/plain; charset", "text/plain; =x", "a/b; x=\"open",
            "a/b; x=\"a\u{0B}\"", "text/plain\u{2028}", "te xt/plain", "a/b; x=y z",
        ] {
            XCTAssertFalse(HTTPFieldRules.isMediaType(bad), bad)
        }
    }
}
