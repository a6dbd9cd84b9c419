import XCTest

@testable import LANShare

final class ShareRequestHandlerTests: XCTestCase {
    /// A file's name (chosen by whoever named it, often a server) cannot end the header or its quotes.
    func testANameIsEscapedForItsQuotedHeader() {
        XCTAssertEqual(ShareRequestHandler.escaped("a\"b\r\nX-Evil: 1\\%.bin"), "a%22b%0D%0AX-Evil: 1%5C%25.bin")
        XCTAssertEqual(ShareRequestHandler.escaped("été.iso"), "%C3%A9t%C3%A9.iso")
        XCTAssertEqual(ShareRequestHandler.escaped("plain-1.0.tar.gz"), "plain-1.0.tar.gz")
    }
}
