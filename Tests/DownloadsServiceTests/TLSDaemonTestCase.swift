import DBus
import Foundation
import TestSupport
import XCTest

/// `DaemonTestCase` with nginx serving HTTPS (`TLSTestServer`): certificates from a test CA,
/// HTTP/2 and HTTP/1.1 sites, and sites whose certificates fail each check.
class TLSDaemonTestCase: DaemonTestCase {
    var tls: TLSTestServer!
    var tlsDirectory: TemporaryDirectory!

    override func setUp() async throws {
        tlsDirectory = try TemporaryDirectory(prefix: "tls-test")
        tls = try TLSTestServer(in: tlsDirectory.path, limitRate: 2_000_000)
        try await super.setUp()
    }

    override func tearDown() async throws {
        try await super.tearDown()
        tls?.stop()
        tlsDirectory?.remove()
    }

    /// Waits for the task to end and fails the test, with its error, unless it finished.
    func assertFinished(
        _ path: ObjectPath, seconds: Double = 60, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let state = try await waitState(path, ["finished", "failed", "cancelled"], seconds: seconds)
        let message = state == "finished" ? "" : (try await property(path, "ErrorMessage")?.stringValue ?? "")
        XCTAssertEqual(state, "finished", message, file: file, line: line)
    }

    /// Downloads `url` into `target`, waits for the task to finish and checks the SHA-256.
    @discardableResult
    func download(
        _ url: String, to target: String, expecting content: [UInt8], options: [String: DBusValue] = [:],
        seconds: Double = 60,
        file: StaticString = #filePath, line: UInt = #line
    ) async throws -> ObjectPath {
        let path = try await start(url, target, options)
        try await assertFinished(path, seconds: seconds, file: file, line: line)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content), url, file: file, line: line)
        return path
    }
}
