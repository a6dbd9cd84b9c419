import DBus
import Foundation
import TestSupport
import XCTest

/// Uploads with the default `protocol` (`auto`: an `OPTIONS` probe first) to WebDAV servers no one
/// here wrote: lighttpd's mod_webdav answers the probe with a complete head and a chunked body it
/// never ends; the decision is taken from the head, so the file goes at once (it sat at 0 B for
/// 60 s, then again, before). Apache's mod_dav answers the probe in full.
final class WebDAVUploadTests: DaemonTestCase {
    func upload(_ url: String, _ source: String) async throws -> ObjectPath {
        let reply = try await call("Upload", [.string(url), .string(source), .vardict([:])])
        return try XCTUnwrap(reply.first?.objectPathValue)
    }

    func uploadsAtOnce(to kind: WebDAVServer.Kind) async throws {
        let server = try WebDAVServer(kind, in: directory.path)
        defer { server.stop() }
        let content = Self.content(3_000_000, seed: 17)
        let file = directory.file("f.bin")
        try Data(content).write(to: URL(fileURLWithPath: file))
        let started = ContinuousClock.now
        let task = try await upload(server.url("f.bin"), file)
        // Well inside the 60 s stall timeout and the probe's own 10 s.
        let state = try await waitState(task, ["finished", "failed"], seconds: 8)
        let message = try await property(task, "ErrorMessage")?.stringValue ?? ""
        XCTAssertEqual(state, "finished", message)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(8))
        XCTAssertEqual(sha256(ofFile: server.root + "/f.bin"), Self.sha256(content), "\(kind) stored the file")
        let status = try await property(task, "ResponseStatus")?.uint32Value
        XCTAssertTrue(status == 201 || status == 204, "\(String(describing: status))")
    }

    func testAnUploadToLighttpdsWebDAVGoesAtOnce() async throws {
        try await uploadsAtOnce(to: .lighttpd)
    }

    func testAnUploadToApachesModDAVGoesAtOnce() async throws {
        try await uploadsAtOnce(to: .apache)
    }
}
