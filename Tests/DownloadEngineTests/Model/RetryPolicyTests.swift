@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// Back-off with jitter and Retry-After.
final class RetryPolicyTests: XCTestCase {
    func testRetryPolicyBacksOffWithJitterAndHonoursRetryAfter() {
        let policy = RetryPolicy(maxAttempts: 3, baseDelay: 1, maxDelay: 3, retryAfterCap: 10)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: nil, random: 0.5), 1)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: nil, random: 0.5), 2)
        XCTAssertEqual(policy.delay(forRetry: 3, retryAfter: nil, random: 0.5), 3)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: nil, random: 0), 0.8)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: 100, random: 0), 10)
        XCTAssertNil(policy.delay(forRetry: 4, retryAfter: nil, random: 0))
        var headers = HTTPHeaders()
        headers.add(name: "Retry-After", value: "120")
        XCTAssertEqual(HTTPHeaderRules.retryAfter(headers, cap: 60), 60)
        var dated = HTTPHeaders()
        dated.add(name: "Retry-After", value: "Tue, 14 Nov 2023 22:13:30 GMT")
        XCTAssertEqual(HTTPHeaderRules.retryAfter(dated, now: Date(timeIntervalSince1970: 1_700_000_000), cap: 60), 10)
    }
}
