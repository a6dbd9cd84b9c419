import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// By default the daemon offers servers HTTP/1.1 alone (ALPN): a server that also speaks HTTP/2
/// answers a download and an upload over HTTP/1.1, several downloads from it share keep-alive
/// connections, and `GetMetrics` names the protocol as nginx saw it. `--http2` is `HTTPSTests`'.
final class HTTPVersionTests: TLSDaemonTestCase {
    override var extraArguments: [String] { ["--ca-file", tls.certificates.caFile] }

    func testAServerOfferingHTTP2IsAnsweredOverHTTP11ByDefault() async throws {
        let content = Self.content(3_000_000, seed: 41)
        try tls.file("v.bin", content)
        var tasks: [ObjectPath] = []
        for name in ["v1", "v2"] {
            tasks.append(
                try await download(tls.url(.http2, "/v.bin"), to: directory.file("\(name).bin"), expecting: content))
        }
        let requests = tls.requests(for: "/v.bin", on: .http2)
        XCTAssertEqual(requests.map(\.httpVersion), ["HTTP/1.1", "HTTP/1.1"])
        XCTAssertEqual(Set(requests.map(\.connection)).count, 1, "the second download reused the first's connection")
        for task in tasks {
            let transactions = try await getMetrics(task).transactions
            XCTAssertEqual(transactions.map { $0["protocol"]?.stringValue }, ["http/1.1"])
        }

        let file = directory.file("up.bin")
        try Data(content).write(to: URL(fileURLWithPath: file))
        let reply = try await call("Upload", [.string(tls.url(.http2, "/put/up.bin")), .string(file), .vardict([:])])
        try await assertFinished(try XCTUnwrap(reply.first?.objectPathValue))
        XCTAssertEqual(sha256(ofFile: tls.www + "/put/up.bin"), Self.sha256(content), "nginx stored the file")
        XCTAssertEqual(tls.requests(for: "/put/up.bin", on: .http2).last?.httpVersion, "HTTP/1.1")
    }
}
