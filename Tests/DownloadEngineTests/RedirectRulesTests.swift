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
        XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: "https://a/b", to: "http://a/b"))
        XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: "http://a/b", to: "file:///etc/passwd"))
        XCTAssertThrowsError(try RedirectRules.checkedRedirect(from: "http://a/b", to: "unix:///run/x"))
    }
}
