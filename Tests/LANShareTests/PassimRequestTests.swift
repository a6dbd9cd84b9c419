import LANShare
import XCTest

/// Requests read as Passim reads them (`passim_server_handler_cb`): the statuses of what it
/// refuses, the hash lowercased, the path a label only.
final class PassimRequestTests: XCTestCase {
    let hash = String(repeating: "ab", count: 32)

    func testAFileByItsHashWithTheNameALabel() {
        XCTAssertEqual(
            PassimRequest.parse(method: "GET", target: "/firmware.cab?sha256=\(hash)"),
            .file(sha256: hash, name: "firmware.cab"))
        XCTAssertEqual(
            PassimRequest.parse(method: "GET", target: "/My%20File.iso?sha256=\(hash.uppercased())&localhost=false"),
            .file(sha256: hash, name: "My File.iso"), "uppercase hex taken and lowercased; other arguments ignored")
        // A path that climbs is still only a name: nothing is looked up by it.
        XCTAssertEqual(
            PassimRequest.parse(method: "GET", target: "/../../etc/passwd?sha256=\(hash)"),
            .file(sha256: hash, name: "passwd"))
        XCTAssertEqual(
            PassimRequest.parse(method: "GET", target: "/..%2F..%2Fetc%2Fpasswd?sha256=\(hash)"),
            .file(sha256: hash, name: "../../etc/passwd"))
        XCTAssertEqual(PassimRequest.parse(method: "HEAD", target: "/a?sha256=\(hash)"), .file(sha256: hash, name: "a"))
    }

    func testRefusalsCarryPassimsStatuses() {
        func status(_ method: String, _ target: String) -> Int? {
            if case .refused(let status, _) = PassimRequest.parse(method: method, target: target) { return status }
            return nil
        }
        XCTAssertEqual(status("POST", "/a?sha256=\(hash)"), 403, "only GET")
        XCTAssertEqual(status("GET", "/"), 403, "no index")
        XCTAssertEqual(status("GET", "/?sha256=\(hash)"), 403)
        XCTAssertEqual(status("GET", "/a"), 400, "no query")
        XCTAssertEqual(status("GET", "/a?name=x"), 400, "no sha256=")
        XCTAssertEqual(status("GET", "/a?sha256=\(hash)&sha256=\(hash)"), 400, "twice")
        XCTAssertEqual(status("GET", "/a?sha256=abc"), 406, "too short")
        XCTAssertEqual(status("GET", "/a?sha256=\(String(repeating: "g", count: 64))"), 406, "not hex")
        XCTAssertEqual(status("GET", "/a?sha256=\(hash)0"), 406, "too long")
        XCTAssertEqual(status("GET", "/a?sha256="), 406, "empty")
    }
}
