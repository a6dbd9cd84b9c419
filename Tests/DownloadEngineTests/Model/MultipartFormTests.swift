import DownloadModel
import XCTest

/// The head of a form's file part: names quoted as the HTML form encoding quotes them, so no
/// file name (the source's own, which may hold a newline) breaks the part's framing.
final class MultipartFormTests: XCTestCase {
    func testNamesAreQuotedAndANewlineInAFileNameStaysInsideItsQuotes() {
        let form = MultipartForm(
            field: "file", filename: "a \"b\"\r\nX-Injected: 1.txt", fields: ["album": "Holidays"], boundary: "B")
        let prefix = String(decoding: form.prefix(contentType: nil), as: UTF8.self)
        XCTAssertEqual(
            prefix,
            "--B\r\nContent-Disposition: form-data; name=\"album\"\r\n\r\nHolidays\r\n"
                + "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a %22b%22%0D%0AX-Injected: 1.txt\"\r\n"
                + "Content-Type: application/octet-stream\r\n\r\n")
        XCTAssertEqual(String(decoding: form.suffix, as: UTF8.self), "\r\n--B--\r\n")
        XCTAssertEqual(form.contentType, "multipart/form-data; boundary=B")
    }
}
