import XCTest
final class PDownloadEngineTestsTests: XCTestCase { func testNothing() {} }
