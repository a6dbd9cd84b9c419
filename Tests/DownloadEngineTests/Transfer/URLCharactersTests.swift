import DownloadEngine
import DownloadModel
import Metalink
import ProxyRules
import XCTest

/// `URLCharacters`: the one rule for what a URL coming in may not hold, where it is applied.
final class URLCharactersTests: XCTestCase {
    func testSpacesAndControlsAnywhereAreFoundAndNothingElse() {
        for bad in [
            " ", "\t", "\r", "\u{0}", "\u{7F}", "\u{80}", "\u{85}", "\u{9B}", "\u{9F}", "\u{A0}", "\u{1680}",
            "\u{2028}", "\u{3000}",
        ] {
            XCTAssertTrue(URLCharacters.containSpaceOrControl("http://h/a\(bad)b"), bad.debugDescription)
        }
        for good in ["http://h/a%20b?q=1#f", "http://h/café", "http://h/\u{A1}", "http://h/e\u{301}", "http://h/日本"] {
            XCTAssertFalse(URLCharacters.containSpaceOrControl(good), good.debugDescription)
        }
    }

    /// A Metalink document's URLs go through the same rule: a C1 control or a space drops the
    /// URL, not the file.
    func testAMetalinkFilesURLsWithControlsAreDropped() throws {
        let document = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="f.bin">
                <url priority="1">http://a.example/f\u{9B}2J.bin</url>
                <url priority="2">http://b.example/f&#x7F;.bin</url>
                <url priority="3">http://c.example/f\u{3000}.bin</url>
                <url priority="4">http://d.example/f.bin</url>
              </file>
            </metalink>
            """
        let file = try XCTUnwrap(MetalinkDocument.parse(Array(document.utf8)).files.first)
        XCTAssertEqual(file.sources.count, 4)
        XCTAssertEqual(file.downloadURLs(), ["http://d.example/f.bin"])
    }
}
