import DBus
@testable import DownloadsService
import XCTest

/// `StartRequest.checkURL`: the rules a URL meets before it becomes a task.
final class StartRequestTests: XCTestCase {
    private func refusal(_ url: String) -> BusError? {
        do {
            _ = try StartRequest.checkURL(url)
            return nil
        } catch let error as BusError {
            return error
        } catch {
            XCTFail("\(url): \(error)")
            return nil
        }
    }

    func testAcceptsHTTPAndHTTPSURLsAsGiven() throws {
        for url in [
            "http://127.0.0.1:8080/a.bin", "https://example.org/caf%C3%A9?q=1&r=%20#part", "HTTPS://EXAMPLE.ORG/",
        ] {
            XCTAssertEqual(try StartRequest.checkURL(url), url)
        }
    }

    /// A space or a control character anywhere, ASCII or not: C0, DEL, C1 (U+009B is a terminal's
    /// CSI), and Unicode's other spaces. Each is `InvalidArgument`, whichever check sees it first.
    func testRefusesSpacesAndControlCharactersAnywhere() {
        for bad in [" ", "\t", "\n", "\u{7F}", "\u{85}", "\u{9B}", "\u{A0}", "\u{2028}", "\u{3000}"] {
            for url in ["http://example.org/a\(bad)b", "http://example.org/?q=\(bad)", "http://example.org/#\(bad)"] {
                let error = refusal(url)
                XCTAssertEqual(error?.name, "org.example.Downloads.Error.InvalidArgument", url.debugDescription)
                let message = error?.message ?? ""
                XCTAssertTrue(
                    message.contains("spaces or control characters") || message.contains("is not a URL"),
                    "\(url.debugDescription): \(message)"
                )
            }
        }
    }

    func testRefusesOtherSchemesAndNoHost() {
        XCTAssertEqual(refusal("ftp://example.org/f")?.message, "only http and https URLs can be downloaded, not 'ftp'")
        XCTAssertEqual(refusal("http:///f")?.name, "org.example.Downloads.Error.InvalidArgument")
        XCTAssertEqual(
            refusal("http://example.org/" + String(repeating: "a", count: StartRequest.maxURLBytes))?.name,
            "org.example.Downloads.Error.QuotaExceeded"
        )
    }
}
