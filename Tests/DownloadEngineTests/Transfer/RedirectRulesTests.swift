@testable import DownloadModel
@testable import DownloadEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// What a redirect may do.
final class RedirectRulesTests: XCTestCase {
    func testRedirectChecks() throws {
        XCTAssertEqual(try RedirectRules.checkedRedirect(from: "http://a/b/c", to: "d"), "http://a/b/d")
        XCTAssertEqual(try RedirectRules.checkedRedirect(from: "http://a/b", to: "https://c/d"), "https://c/d")
        for (from, to) in [
            ("https://a/b", "http://a/b"), ("http://a/b", "file:///etc/passwd"), ("http://a/b", "unix:///run/x"),
        ] {
            XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: from, to: to)) { error in
                XCTAssertEqual((error as? DownloadError)?.code, .insecureRedirect, "\(from) → \(to): \(error)")
            }
        }
    }
}
