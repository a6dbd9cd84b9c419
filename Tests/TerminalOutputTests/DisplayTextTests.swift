import Foundation
import TerminalOutput
import XCTest
import ShownText

final class DisplayTextTests: XCTestCase {
    func testHiddenCharactersAreShownEscapedAndNothingElseChanges() {
        // C1 CSI/OSC/ST, ESC, a newline, bidi overrides and isolates, a zero-width space.
        XCTAssertEqual(DisplayText.escaped("\u{9B}2J\u{9D}0;pwned\u{9C}evil.txt"), "\\x9b2J\\x9d0;pwned\\x9cevil.txt")
        XCTAssertEqual(DisplayText.escaped("a\u{1B}[2Jb\nc\u{7F}"), "a\\x1b[2Jb\\x0ac\\x7f")
        XCTAssertEqual(DisplayText.escaped("invoice\u{202E}fdp.exe"), "invoice\\u{202e}fdp.exe")
        XCTAssertEqual(
            DisplayText.escaped("\u{200F}\u{2066}x\u{2069}\u{200B}"), "\\u{200f}\\u{2066}x\\u{2069}\\u{200b}")
        XCTAssertEqual(DisplayText.escaped("a\\x1b"), "a\\\\x1b", "a backslash is escaped so the output is unambiguous")
        XCTAssertEqual(DisplayText.escaped("Ünïcödé 文件 🎉.txt"), "Ünïcödé 文件 🎉.txt")
    }

    func testEveryASCIICharacterAloneAndInsidePrintableText() {
        // Printable ASCII is returned as it is (a shortcut); its edges must still be escaped.
        for value in UInt8(0)...0x7F {
            let character = String(UnicodeScalar(value))
            let expected =
                value < 0x20 || value == 0x7F
                ? "\\x" + String(format: "%02x", value)
                : value == UInt8(ascii: "\\") ? "\\\\" : character
            XCTAssertEqual(DisplayText.escaped(character), expected, "byte \(value)")
            XCTAssertEqual(
                DisplayText.escaped("https://example.org/" + character + ".bin"),
                "https://example.org/" + expected + ".bin")
        }
        let url = "https://example.org/files/a%20b.tar.gz?x=1&y=~"
        XCTAssertEqual(DisplayText.escaped(url), url)
    }

    func testQuotedIsShortened() {
        let long = String(repeating: "x", count: 500)
        XCTAssertEqual(DisplayText.quoted(long, limit: 10), "xxxxxxxxxx…")
        XCTAssertEqual(DisplayText.quoted("short", limit: 10), "short")
        XCTAssertEqual(
            DisplayText.quoted("\u{1B}]8;;http://evil/\u{1B}\\", limit: 200), "\\x1b]8;;http://evil/\\x1b\\\\")
    }

    func testMarkupEscapesWhatANotificationServerWouldRender() {
        let location =
            "x <a href=\"https://evil.example/login\">Sign in</a> <img src=\"https://evil.example/t.png\"/> & more"
        XCTAssertEqual(
            DisplayText.markup(location),
            "x &lt;a href=\"https://evil.example/login\"&gt;Sign in&lt;/a&gt; &lt;img src=\"https://evil.example/t.png\"/&gt; &amp; more"
        )
        XCTAssertEqual(DisplayText.markup("a\u{202E}b"), "a\\u{202e}b")
    }
}
