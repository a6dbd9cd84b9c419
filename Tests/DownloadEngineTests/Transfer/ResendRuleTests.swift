@testable import DownloadEngine
import DownloadModel
import XCTest

/// RFC 9110 §9.2.2 as `ResendRule` applies it, without I/O.
final class ResendRuleTests: XCTestCase {
    func attempt(
        _ method: String, key: Bool = false, head: Bool = true, length: Int64 = 100, sent: Int64 = 100
    ) -> ResendRule.Attempt {
        .init(method: method, idempotencyKey: key, headSent: head, bodyLength: length, bodySent: sent)
    }

    func testIdempotentMethodsAreSentAgain() {
        for method in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            XCTAssertNil(ResendRule.doubt(about: attempt(method), lost: .network("reset")), method)
            XCTAssertNil(ResendRule.doubt(aboutEarlySuccess: 201, of: attempt(method, sent: 10)), method)
        }
    }

    func testAPostOrPatchSentWholeIsInDoubt() {
        for method in ["POST", "PATCH", "MKCOL", "post"] {
            let doubt = ResendRule.doubt(about: attempt(method), lost: .timeout("nothing for 60 s"))
            XCTAssertEqual(doubt?.code, .outcomeUnknown, method)
            XCTAssertFalse(doubt?.isRetryable ?? true)
            XCTAssertEqual(
                ResendRule.doubt(aboutEarlySuccess: 201, of: attempt(method, sent: 10))?.code, .outcomeUnknown)
        }
        // An empty body goes whole with its head.
        XCTAssertEqual(
            ResendRule.doubt(about: attempt("POST", length: 0, sent: 0), lost: .network("reset"))?.code, .outcomeUnknown
        )
    }

    func testAPostTheServerCannotHaveAppliedIsSentAgain() {
        XCTAssertNil(
            ResendRule.doubt(about: attempt("POST", head: false, sent: 0), lost: .network("refused")), "never went out")
        XCTAssertNil(ResendRule.doubt(about: attempt("POST", sent: 99), lost: .network("reset")), "the body was cut")
    }

    func testAnIdempotencyKeyMakesItSafe() {
        XCTAssertTrue(ResendRule.hasIdempotencyKey(["User-Agent", "idempotency-KEY"]))
        XCTAssertFalse(ResendRule.hasIdempotencyKey(["Idempotency"]))
        XCTAssertNil(ResendRule.doubt(about: attempt("POST", key: true), lost: .network("reset")))
        XCTAssertNil(ResendRule.doubt(aboutEarlySuccess: 200, of: attempt("PATCH", key: true, sent: 1)))
    }

    /// curl's `--retry` set, and nothing else among the statuses.
    func testOnlyCurlsTransientStatusesAreRetried() {
        let retried = (100...599).filter { DownloadError.http(status: $0, reason: "x").isRetryable }
        XCTAssertEqual(retried, [408, 429, 500, 502, 503, 504])
    }
}
