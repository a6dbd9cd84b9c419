@testable import DownloadEngine
@testable import DownloadModel
import XCTest

/// `Source`: the one place that says which URLs are sources and what their origin is.
final class SourceTests: XCTestCase {
    func testOnlyHTTPAndHTTPSWithAHostAreSources() {
        XCTAssertNotNil(Source("http://example.org/a"))
        XCTAssertNotNil(Source("HTTPS://Example.ORG:8443/a"))
        for text in ["ftp://example.org/a", "file:///etc/passwd", "http:///nohost", "example.org/a", "", "data:,x"] {
            XCTAssertNil(Source(text), text)
        }
        XCTAssertTrue(Source.isSourceScheme("HTTP"))
        XCTAssertFalse(Source.isSourceScheme("ws"))
    }

    func testTheOriginIsSchemeHostAndPortWithDefaults() throws {
        let plain = try XCTUnwrap(Source("http://Example.org/a"))
        XCTAssertEqual(plain.origin, Source.Origin(scheme: "http", host: "example.org", port: 80))
        XCTAssertFalse(plain.isSecure)
        let secure = try XCTUnwrap(Source("HTTPS://example.org/b"))
        XCTAssertEqual(secure.origin, Source.Origin(scheme: "https", host: "example.org", port: 443))
        XCTAssertTrue(secure.isSecure)
        XCTAssertEqual(Source("http://example.org:80/")?.origin, plain.origin)
        XCTAssertNotEqual(Source("http://example.org:8080/")?.origin, plain.origin)
    }

    func testASourceSaysWhatItIsToItsTransferAndAMirrorSetsEntriesToo() throws {
        XCTAssertEqual(Source("https://a.example/f")?.kind, .origin)
        XCTAssertEqual(Source("https://b.example/f", kind: .mirror)?.kind, .mirror)
        // Its kind is no part of where it is: the same origin and server.
        XCTAssertEqual(Source("https://b.example/f", kind: .peer)?.origin, Source("https://b.example/f")?.origin)
        let set = MirrorSet(primary: "https://a.example/f", mirrors: ["https://b.example/f"], perServer: 2)
        XCTAssertEqual(set.sources.map(\.kind), [.origin, .mirror])
    }
}
