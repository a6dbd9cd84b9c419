import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Uploads as downloads go: over HTTPS with HTTP/2 and HTTP/1.1 to nginx (its dav module stores a
/// `PUT`), and through tinyproxy: a plain http upload forwarded with its body, an https one
/// through a CONNECT tunnel. The daemon offers HTTP/2 here (`--http2`); without it the same
/// upload goes over HTTP/1.1 (`HTTPVersionTests`).
final class UploadNetworkTests: TLSDaemonTestCase {
    override var extraArguments: [String] { ["--ca-file", tls.certificates.caFile, "--http2"] }

    func upload(_ url: String, _ source: String, _ options: [String: DBusValue] = [:]) async throws -> ObjectPath {
        let reply = try await call("Upload", [.string(url), .string(source), .vardict(options)])
        return try XCTUnwrap(reply.first?.objectPathValue)
    }

    func testPutOverHTTP2AndHTTP1ToNginx() async throws {
        let content = Self.content(5_000_000, seed: 91)
        let file = directory.file("video.mp4")
        try Data(content).write(to: URL(fileURLWithPath: file))
        let h2 = try await upload(tls.url(.http2, "/put/h2.mp4"), file)
        try await assertFinished(h2)
        XCTAssertEqual(sha256(ofFile: tls.www + "/put/h2.mp4"), Self.sha256(content), "nginx stored the file")
        let status = try await property(h2, "ResponseStatus")
        XCTAssertEqual(status?.uint32Value, 201, "nginx's dav module answers 201 Created")
        XCTAssertEqual(
            tls.requests(for: "/put/h2.mp4", on: .http2).last?.httpVersion, "HTTP/2.0", "sent as an HTTP/2 stream")
        let h1 = try await upload(tls.url(.http1, "/put/h1.mp4"), file)
        try await assertFinished(h1)
        XCTAssertEqual(sha256(ofFile: tls.www + "/put/h1.mp4"), Self.sha256(content))
        XCTAssertEqual(tls.requests(for: "/put/h1.mp4", on: .http1).last?.httpVersion, "HTTP/1.1")
    }

    func testThroughTinyproxyForwardedAndTunnelled() async throws {
        let proxy = try TinyProxy(in: directory.path)
        defer { proxy.stop() }
        let content = Self.content(2_000_000, seed: 92)
        let file = directory.file("backup.tar")
        try Data(content).write(to: URL(fileURLWithPath: file))
        http.set("/store", Route.receiving(status: 201, reply: "kept\n"))
        let plain = try await upload(
            http.url("/store"), file, ["proxy": .string(proxy.url), "method": .string("POST")])
        try await assertFinished(plain)
        XCTAssertEqual(
            proxy.forwarded("POST"), [http.url("/store")], "an http upload is forwarded with its body, not tunnelled")
        XCTAssertEqual(proxy.connectRequests, [])
        XCTAssertEqual(http.received("/store").last.map { Self.sha256($0.body) }, Self.sha256(content))
        let reply = try await client.call(
            destination: "org.example.Downloads", path: plain, interface: "org.example.Downloads.Task",
            method: "GetReply"
        )
        XCTAssertEqual(
            reply[2].bytesValue.map { String(decoding: $0, as: UTF8.self) }, "kept\n",
            "the reply came back through the proxy")

        let tunnelled = try await upload(tls.url(.http2, "/put/tunnelled.tar"), file, ["proxy": .string(proxy.url)])
        try await assertFinished(tunnelled)
        XCTAssertEqual(proxy.connectRequests.last, "localhost:\(tls.port(.http2))", "https: CONNECT, then TLS inside")
        XCTAssertEqual(sha256(ofFile: tls.www + "/put/tunnelled.tar"), Self.sha256(content))
    }

    func testAResumableUploadGoesThroughTinyproxyAndResumesThere() async throws {
        let proxy = try TinyProxy(in: directory.path)
        defer { proxy.stop() }
        let server = try ResumableUploadServer()
        defer { server.stop() }
        let content = Self.content(3_000_000, seed: 93)
        let file = directory.file("album.zip")
        try Data(content).write(to: URL(fileURLWithPath: file))
        server.cut(atTotals: [1_500_000])
        // (A request through tinyproxy, which writes a head a line at a time, used to get no
        // answer now and then: the test server's NIOResumableUpload handler read no further
        // until a head came whole. Fixed in `ResumableUploadServer`; no stall is waited out now.)
        let task = try await upload(server.url("/albums"), file, ["proxy": .string(proxy.url)])
        try await assertFinished(task)
        XCTAssertEqual(server.uploads.map(\.sha256), [Self.sha256(content)])
        XCTAssertEqual(server.bodyBytes, 3_000_000, "the cut cost nothing through the proxy either")
        XCTAssertEqual(proxy.forwarded("OPTIONS"), [server.url("/albums")], "asked through the proxy")
        let patches = proxy.forwarded("PATCH").count, heads = proxy.forwarded("HEAD").count
        XCTAssertGreaterThanOrEqual(patches, 2, "appended, cut, appended from the server's offset")
        XCTAssertGreaterThanOrEqual(heads, 1, "the offset asked through the proxy after the cut")
    }
}
