import XCTest
final class PDownloadsServiceTestsTests: XCTestCase { func testNothing() {} }
