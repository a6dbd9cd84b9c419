@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import NIOHTTP1
import TestHTTPServer
import TestSupport
import XCTest

/// Downloads with mirrors (option `mirrors`): ranges spread over several local servers, each a
/// different origin; a mirror that dies, serves another file, redirects or is far slower is
/// dropped (or followed) and the file is the source's every time.
final class MirrorTests: EngineTestCase {
    var mirrors: [TestHTTPServer] = []

    override func tearDown() async throws {
        for mirror in mirrors { mirror.stop() }
        try await super.tearDown()
    }

    func mirror() throws -> TestHTTPServer {
        let server = try TestHTTPServer()
        mirrors.append(server)
        return server
    }

    static func route(_ content: [UInt8], rate: Int? = 3_000_000, etag: String? = "\"v1\"") -> Route {
        var route = Route(content: content)
        route.bytesPerSecond = rate
        route.etag = etag
        return route
    }

    func finished(_ id: UInt64, holding content: [UInt8], line: UInt = #line) async throws {
        let done = try await wait(id, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "", line: line)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content), line: line)
    }

    // MARK: The choice of source (pure)

    func testSourcesAreSharedByConnectionsAndDroppedButNeverTheLast() {
        var set = MirrorSet(
            primary: "http://a.example/f",
            mirrors: ["http://b.example/f", "http://a.example:80/g", "http://a.example/f"], perServer: 2)
        XCTAssertEqual(set.sources.count, 3, "the URL itself is not a mirror of itself")
        XCTAssertEqual(
            [set.take(), set.take(), set.take(), set.take()], [0, 1, 2, 1],
            "fewest connections first; a.example has two at most")
        XCTAssertNil(set.take(), "every server at its limit")
        set.release(0, bytes: 1_000_000, seconds: 4)
        set.release(2, bytes: 10_000, seconds: 4)
        XCTAssertEqual(set.tooSlow(), [2], "a tenth of the fastest's speed, measured long enough")
        XCTAssertTrue(set.drop(2, because: "slow"))
        XCTAssertFalse(set.drop(2, because: "again"))
        XCTAssertTrue(set.drop(1, because: "dead"))
        XCTAssertFalse(set.drop(0, because: "the last"), "the last source stays")
        XCTAssertEqual(set.active, [0])
        XCTAssertTrue(set.redirect(0, to: "http://c.example/f", limit: 1))
        XCTAssertFalse(set.redirect(0, to: "http://d.example/f", limit: 1))
        XCTAssertEqual(Source.server(of: "HTTPS://Mirror.Example/x"), "https://mirror.example:443")

        // Measured while fetching: a connection's window against the fastest other source's.
        var live = MirrorSet(primary: "http://a.example/f", mirrors: ["http://b.example/f"], perServer: 4)
        XCTAssertEqual(live.observe(1, speed: 10_000), 0, "nothing to compare with yet")
        XCTAssertEqual(live.observe(0, speed: 2_000_000), 1_000, "a tenth of the other's")
        XCTAssertFalse(live.sources[0].foundSlow)
        XCTAssertEqual(live.observe(1, speed: 10_000), 200_000)
        XCTAssertTrue(live.sources[1].foundSlow)
        live.release(0, bytes: 3_000_000, seconds: 1)
        XCTAssertEqual(live.sources[0].windowSpeed, 3_000_000, "a finished request's speed counts as a window")
    }

    func testPeersJoinFirstOnATieOneConnectionUntilTheySendAndAPassimPeerOnce() {
        var set = MirrorSet(primary: "http://a.example/f", mirrors: [], perServer: 4)
        XCTAssertEqual(set.take(), 0)
        XCTAssertEqual(set.add(peer: "https://10.0.0.2:27500/f?sha256=x", oneRequest: false), 1)
        XCTAssertNil(set.add(peer: "https://10.0.0.2:27500/f?sha256=x", oneRequest: false), "told twice: one source")
        XCTAssertEqual(set.add(peer: "https://10.0.0.3:27500/f?sha256=x", oneRequest: true), 2)
        XCTAssertEqual(set.take(), 1, "a peer before the uplink")
        XCTAssertEqual(set.take(), 2)
        XCTAssertEqual(set.take(), 0, "each peer has its one connection until it sends a range")
        set.release(1, bytes: 1 << 20, seconds: 0.1)
        set.release(2, bytes: 1 << 20, seconds: 0.1)
        XCTAssertEqual(set.peerBytes, 2 << 20, "what the peers sent: the whole-file check's question")
        XCTAssertEqual(set.take(), 1, "it sent one: as many as its server allows")
        XCTAssertEqual(set.take(), 1)
        XCTAssertEqual(set.sources[2].requests, 1)
        XCTAssertNotEqual(set.take(), 2, "a Passim peer is taken for one request")
        XCTAssertEqual(set.activePeers, 2)
        set.dropPeers(because: "their bytes failed the check")
        XCTAssertEqual(set.active, [0], "only the URL is left")
        XCTAssertEqual(set.sources.filter { $0.kind == .peer }.count, 2)
    }

    func testOnProbationASourceGetsOneConnectionUntilAPieceProvesIt() {
        var set = MirrorSet(primary: "http://a.example/f", mirrors: ["http://b.example/f"], perServer: 4)
        XCTAssertEqual([set.take(probation: true), set.take(probation: true)], [0, 1])
        XCTAssertNil(set.take(probation: true), "each has its one connection")
        XCTAssertTrue(set.awaitsProof)
        set.proved([1])
        XCTAssertEqual(set.take(probation: true), 1, "proven: as many as its server allows")
        XCTAssertEqual(set.take(probation: true), 1)
        XCTAssertEqual(set.take(), 0, "without probation, as before")
        set.proved([0])
        XCTAssertFalse(set.awaitsProof)
    }

    // MARK: Through the engine

    func testRangesAreSpreadOverTheURLAndItsMirrors() async throws {
        let content = Self.content(8 << 20, seed: 21)
        let (one, two) = (try mirror(), try mirror())
        server.set("/f.iso", Self.route(content))
        one.set("/pub/f.iso", Self.route(content, etag: "\"other-etag\""))
        two.set("/f.iso", Self.route(content, etag: nil))
        let id = try start("/f.iso") { options in
            options.connections = 6
            options.mirrors = [one.url("/pub/f.iso"), two.url("/f.iso")]
            options.headers = ["Authorization": "Bearer secret"]
        }
        try await finished(id, holding: content)
        for (name, source) in [("the URL", server!), ("mirror one", one), ("mirror two", two)] {
            let ranged = source.requests.filter { $0.range != nil }
            XCTAssertFalse(ranged.isEmpty, "\(name) served ranges")
            XCTAssertTrue(ranged.allSatisfy { $0.status == 206 }, "\(name): \(ranged.map(\.status))")
        }
        XCTAssertTrue(one.requests.allSatisfy { $0.ifRange == nil }, "a mirror's ETag is its own: no If-Range")
        XCTAssertTrue(
            one.requests.allSatisfy { $0.userHeaders["authorization"] == nil }, "no credentials to another origin")
        XCTAssertEqual(server.requests.first?.userHeaders["authorization"], "Bearer secret")
    }

    func testAMirrorThatDiesOrServesAnotherFileIsDroppedAndTheFileIsRight() async throws {
        let content = Self.content(6 << 20, seed: 22)
        let (dying, other, redirecting, target) = (try mirror(), try mirror(), try mirror(), try mirror())
        server.set("/f", Self.route(content))
        var dies = Self.route(content)
        dies.closeAfter = 200_000
        dying.set("/f", dies)
        other.set("/f", Self.route(Self.content(5 << 20, seed: 23)))  // another length: another file
        var moved = Route(content: [])
        moved.redirect = (status: 302, location: target.url("/real/f"))
        redirecting.set("/f", moved)
        target.set("/real/f", Self.route(content))
        let id = try start("/f") { options in
            options.connections = 8
            options.mirrors = [dying.url("/f"), other.url("/f"), redirecting.url("/f")]
        }
        try await finished(id, holding: content)
        // Two connections may be on a source when it fails (two per source): none comes after.
        XCTAssertLessThanOrEqual(dying.requests.count, 2, "dropped after its first cut")
        XCTAssertLessThanOrEqual(other.requests.count, 2, "dropped after answering for another length")
        XCTAssertFalse(target.requests.filter { $0.status == 206 }.isEmpty, "the mirror's redirect was followed")
    }

    func testAFarSlowerMirrorIsDropped() async throws {
        let content = Self.content(12 << 20, seed: 24)
        let slow = try mirror()
        server.set("/f", Self.route(content, rate: 2_500_000))
        slow.set("/f", Self.route(content, rate: 40_000))
        let id = try start("/f") { options in
            options.connections = 4
            options.mirrors = [slow.url("/f")]
        }
        try await finished(id, holding: content)
        XCTAssertLessThan(slow.requests.map(\.bodyBytesSent).reduce(0, +), 1 << 20, "the slow mirror fetched little")
    }

    /// With every mirror gone the URL itself finishes the download; with the URL failing for
    /// good (404), the mirrors do.
    func testTheURLItselfCanBeTheOneLeftOrTheOneDropped() async throws {
        let content = Self.content(4 << 20, seed: 25)
        let good = try mirror()
        server.set("/gone", Self.route(content))
        good.set("/gone", Self.route(content))
        let id = try start("/gone") { options in
            options.connections = 4
            options.mirrors = [good.url("/gone")]
        }
        // Once the download split, the URL itself answers 404 from then on.
        try await waitForBytes(id, atLeast: 500_000)
        server.update("/gone") { $0.failFirst = (count: 1_000, status: 404, retryAfter: nil) }
        try await finished(id, holding: content)
    }

    /// The URL itself down at the start (nothing listening, or 503 every time): the first request
    /// goes to the mirrors, and the download finishes from them.
    func testADownURLAtTheStartFallsBackToItsMirrors() async throws {
        let content = Self.content(6 << 20, seed: 27)
        let (one, two) = (try mirror(), try mirror())
        one.set("/f", Self.route(content, etag: "\"one\""))
        two.set("/f", Self.route(content, etag: "\"two\""))
        let nothing = try FreePort.pick()
        let refused = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: "http://127.0.0.1:\(nothing)/f",
                destination: directory.file("refused"),
                destinationIsDirectory: false,
                options: {
                    var options = DownloadOptions(); options.connections = 4
                    options.mirrors = [one.url("/f"), two.url("/f")]; return options
                }()
            )
        ).id
        nextID += 1
        let done = try await wait(refused, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
        XCTAssertEqual(sha256(ofFile: directory.file("refused")), Self.sha256(content))
        XCTAssertTrue(
            one.requests.allSatisfy { $0.ifRange == nil || $0.ifRange == "\"one\"" },
            "If-Range only where the validator came from")
        XCTAssertTrue(two.requests.allSatisfy { $0.ifRange == nil }, "\(two.requests.map(\.ifRange))")

        var unavailable = Self.route(content)
        unavailable.failFirst = (count: 1_000, status: 503, retryAfter: nil)
        server.set("/busy", unavailable)
        let busy = try start("/busy") { options in
            options.connections = 4
            options.mirrors = [one.url("/f"), two.url("/f")]
        }
        try await finished(busy, holding: content)
        XCTAssertLessThanOrEqual(server.requests(for: "/busy").count, 2, "the URL was dropped after its first answer")
    }

    // MARK: Metalink/HTTP (RFC 6249)

    func testLinkAndDigestHeadersAreRead() {
        var headers = HTTPHeaders()
        headers.add(
            name: "Link",
            value: "<http://b.example/f>; rel=duplicate; pri=2, <https://c.example/f>; rel=\"duplicate\"; pri=1")
        headers.add(name: "Link", value: "</relative/f>; rel=duplicate")
        headers.add(name: "Link", value: "<http://d.example/style.css>; rel=stylesheet")
        headers.add(name: "Link", value: "<ftp://e.example/f>; rel=duplicate")
        headers.add(name: "Link", value: "<http://a.example/f>; rel=duplicate")
        XCTAssertEqual(
            MetalinkHeaders.mirrors(in: headers, base: "http://a.example/f"),
            ["https://c.example/f", "http://b.example/f", "http://a.example/relative/f"],
            "by pri, relative ones resolved, no other relation, scheme or the URL itself")
        var digests = HTTPHeaders()
        digests.add(
            name: "Digest", value: "MD5=1B2M2Y8AsgTpgAmY7PhCfg==, SHA-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
        XCTAssertEqual(
            MetalinkHeaders.checksum(in: digests)?.text,
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "the strongest given")
        var repr = HTTPHeaders()
        repr.add(
            name: "Repr-Digest",
            value: "sha-512=:z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==:")
        XCTAssertEqual(MetalinkHeaders.checksum(in: repr)?.algorithm, .sha512)
        var bad = HTTPHeaders()
        bad.add(name: "Digest", value: "SHA-256=not-base64")
        XCTAssertNil(MetalinkHeaders.checksum(in: bad))
    }

    func testMirrorsAndTheDigestComeFromTheFirstResponsesHead() async throws {
        let content = Self.content(8 << 20, seed: 26)
        let (one, two) = (try mirror(), try mirror())
        var route = Self.route(content)
        let sha256 = Data(TestData.sha256(content).hexBytes).base64EncodedString()
        route.extraHeaders = [
            ("Link", "<\(one.url("/f"))>; rel=duplicate; pri=1"), ("Link", "<\(two.url("/f"))>; rel=duplicate; pri=2"),
            ("Digest", "SHA-256=\(sha256)"),
        ]
        server.set("/f", route)
        one.set("/f", Self.route(content))
        two.set("/f", Self.route(content))
        let id = try start("/f") { $0.connections = 6 }
        try await finished(id, holding: content)
        XCTAssertFalse(one.requests.isEmpty, "the first Link mirror served ranges")
        XCTAssertFalse(two.requests.isEmpty, "the second too")
        let record = try XCTUnwrap(manager.snapshot(id)?.record)
        XCTAssertEqual(record.options.mirrors, [one.url("/f"), two.url("/f")], "kept with the task")
        XCTAssertEqual(record.options.checksum?.text, "sha256:" + TestData.sha256(content))

        // A Digest that does not match fails the download, as a checksum option would.
        var lying = Self.route(content)
        lying.extraHeaders = [("Digest", "SHA-256=\(Data(repeating: 0, count: 32).base64EncodedString())")]
        server.set("/lying", lying)
        let wrong = try start("/lying")
        let done = try await wait(wrong, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.record.errorName, "ChecksumMismatch")
        // use_metalink_headers false: neither is taken.
        let ignoring = try start("/f") { options in
            options.connections = 6
            options.useMetalinkHeaders = false
        }
        let before = one.requests.count + two.requests.count
        try await finished(ignoring, holding: content)
        XCTAssertEqual(one.requests.count + two.requests.count, before)
        XCTAssertNil(manager.snapshot(ignoring)?.record.options.checksum)
    }
}

private extension String {
    var hexBytes: [UInt8] {
        var bytes: [UInt8] = []
        var index = startIndex
        while index < endIndex, let next = self.index(index, offsetBy: 2, limitedBy: endIndex) {
            bytes.append(UInt8(self[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }
}
