@testable import DownloadEngine
import DownloadModel
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Downloads with `lan_peers`: the file's bytes come from machines of the local network that
/// have it by its sha-256 (here Python peers on 127.0.0.1 over HTTPS with self-signed
/// certificates, `LANPeerServer`) beside a slow origin, every byte checked; a peer that lies,
/// stalls, refuses, redirects or floods its head is dropped and the file is right every time.
final class LANPeerTests: EngineTestCase {
    static let size = 8 << 20
    let content = EngineTestCase.content(LANPeerTests.size, seed: 78)
    var peers: [LANPeerServer] = []
    var file: String!
    var hash: String { Self.sha256(content) }

    override func setUp() async throws {
        try await super.setUp()
        file = directory.file("peer-copy")
        FileManager.default.createFile(atPath: file, contents: Data(content))
        // The origin is slow, so a peer has time to join and serve.
        var route = Route(content: content)
        route.bytesPerSecond = 1_000_000
        server.set("/f.iso", route)
    }

    override func tearDown() async throws {
        for peer in peers { peer.stop() }
        try await super.tearDown()
    }

    func peer(_ mode: LANPeerServer.Mode, _ argument: String = "") throws -> LANPeerServer {
        let peer = try LANPeerServer(in: directory.path, file: file, mode: mode, argument: argument)
        peers.append(peer)
        return peer
    }

    /// A manager whose finder tells of `offers`.
    func useFinder(_ offers: [PeerOffer]) async -> FakePeerFinder {
        let finder = FakePeerFinder(offers)
        await manager.shutdown()
        manager = makeManager { $0.peerFinder = finder }
        return finder
    }

    func startWithPeers(pieces: PieceHashes? = nil, _ more: (inout DownloadOptions) -> Void = { _ in }) throws -> UInt64
    {
        try start("/f.iso") { options in
            options.checksum = try? Checksum(.sha256, hex: self.hash)
            options.lanPeers = true
            options.pieces = pieces
            more(&options)
        }
    }

    func finishedRight(_ id: UInt64, line: UInt = #line) async throws -> TaskSnapshot {
        let done = try await wait(id, for: [.finished, .failed], seconds: 60)
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "", line: line)
        XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), hash, line: line)
        return done
    }

    func testAGoodPeerServesMostOfTheFileAndGetsNothingOfTheCallers() async throws {
        let good = try peer(.good)
        let finder = await useFinder([PeerOffer(url: good.url(name: "f.iso", sha256: hash), takesRanges: true)])
        let id = try startWithPeers { options in
            options.headers = ["Authorization": "Bearer secret", "Cookie": "a=b", "X-Api-Key": "k"]
            options.referrer = "http://127.0.0.1/page"
        }
        let done = try await finishedRight(id)
        XCTAssertEqual(finder.lookups.withLockedValue { $0.map(\.sha256) }, [hash])
        XCTAssertEqual(finder.lookups.withLockedValue { $0.first?.name }, "f.iso", "Passim's label: the file's name")
        let fromPeer = done.record.metrics?.bytesBySource["peer:127.0.0.1"] ?? 0
        XCTAssertGreaterThan(
            fromPeer, Int64(Self.size / 2), "mostly from the peer: \(done.record.metrics?.bytesBySource ?? [:])")
        XCTAssertFalse(good.log.isEmpty)
        for request in good.log {
            for name in ["authorization", "cookie", "referer", "x-api-key", "proxy-authorization", "if-range"] {
                XCTAssertNil(request.headers[name], "\(name) went to a peer")
            }
            XCTAssertEqual(request.path, "/f.iso")
        }
        XCTAssertTrue(
            server.requests.contains { $0.userHeaders["authorization"] == "Bearer secret" }, "the origin has them")
    }

    func testWithTheOriginUnreachableThePeerAloneServesTheFile() async throws {
        let good = try peer(.good)
        _ = await useFinder([PeerOffer(url: good.url(name: "f.iso", sha256: hash), takesRanges: true)])
        // An origin that refuses every connection: a port nothing listens on.
        var options = DownloadOptions()
        options.checksum = try Checksum(.sha256, hex: hash)
        options.lanPeers = true
        let id = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: "http://127.0.0.1:\(try FreePort.pick())/f.iso",
                destination: directory.file("out1"), destinationIsDirectory: false, options: options)
        ).id
        let done = try await finishedRight(id)
        XCTAssertEqual(done.record.metrics?.bytesBySource["peer:127.0.0.1"], Int64(Self.size))
    }

    func testNothingIsAskedOfPeersWithoutLanPeersOrWithoutASha256() async throws {
        let good = try peer(.good)
        let finder = await useFinder([PeerOffer(url: good.url(name: "f.iso", sha256: hash), takesRanges: true)])
        let plain = try start("/f.iso") { $0.checksum = try? Checksum(.sha256, hex: self.hash) }
        let noHash = try start("/f.iso") { $0.lanPeers = true }
        for id in [plain, noHash] {
            let done = try await wait(id, for: [.finished, .failed], seconds: 60)
            XCTAssertEqual(done.state, .finished)
            XCTAssertNil(done.record.metrics?.bytesBySource["peer:127.0.0.1"])
        }
        XCTAssertTrue(finder.lookups.withLockedValue { $0.isEmpty }, "no lookup at all")
        XCTAssertTrue(good.log.isEmpty)
    }

    func testAPeerThatLiesIsDroppedAndTheFileFetchedAgainFromTheURL() async throws {
        let liar = try peer(.wrong)
        _ = await useFinder([PeerOffer(url: liar.url(name: "f.iso", sha256: hash), takesRanges: true)])
        let id = try startWithPeers()
        let done = try await finishedRight(id)
        XCTAssertFalse(liar.log.isEmpty, "the liar was asked")
        XCTAssertGreaterThanOrEqual(done.record.metrics?.restarts ?? 0, 1, "fetched again from zero")
        let fromURL = done.record.metrics?.bytesBySource[server.url("/f.iso")] ?? 0
        XCTAssertGreaterThanOrEqual(fromURL, Int64(Self.size), "the whole file from the URL after the mismatch")
    }

    func testWithPieceHashesALyingPeerCostsOnePiece() async throws {
        let liar = try peer(.wrong)
        _ = await useFinder([PeerOffer(url: liar.url(name: "f.iso", sha256: hash), takesRanges: true)])
        let piece: Int64 = 256 << 10
        let hexes = stride(from: 0, to: content.count, by: Int(piece)).map {
            Self.sha256(Array(content[$0..<min(content.count, $0 + Int(piece))]))
        }
        let id = try startWithPeers(pieces: try PieceHashes(.sha256, length: piece, hashes: hexes))
        let done = try await finishedRight(id)
        XCTAssertEqual(liar.log.count, 1, "one piece on probation, then dropped")
        XCTAssertEqual(done.record.metrics?.restarts ?? 0, 0, "no restart: the piece said which bytes were wrong")
    }

    func testPeersThatRefuseRedirectStallOrFloodTheirHeadAreDropped() async throws {
        let bad = [
            try peer(.status, "403"), try peer(.status, "404"), try peer(.redirect, server.url("/f.iso")),
            try peer(.hugeheader), try peer(.stall),
        ]
        _ = await useFinder(bad.map { PeerOffer(url: $0.url(name: "f.iso", sha256: hash), takesRanges: true) })
        let id = try startWithPeers()
        _ = try await finishedRight(id)
        for peer in bad {
            // One connection until a peer has sent a range: each of these costs one request.
            XCTAssertLessThanOrEqual(peer.log.count, 1, "asked once, then dropped: \(peer.log.map { $0.range ?? "" })")
        }
        XCTAssertFalse(bad[0].log.isEmpty && bad[1].log.isEmpty, "peers were asked")
    }

    func testAnHTTP10PeerThatAnswersAndClosesServes() async throws {
        let old = try peer(.http10)
        _ = await useFinder([PeerOffer(url: old.url(name: "f.iso", sha256: hash), takesRanges: true)])
        let done = try await finishedRight(try startWithPeers())
        XCTAssertGreaterThan(done.record.metrics?.bytesBySource["peer:127.0.0.1"] ?? 0, 0)
    }

    func testAPassimPeerIsAskedForOneRangeOnce() async throws {
        let passim = try peer(.passim)
        _ = await useFinder([PeerOffer(url: passim.url(name: "f.iso", sha256: hash), takesRanges: false)])
        let done = try await finishedRight(try startWithPeers())
        XCTAssertEqual(passim.log.count, 1, "one request: Passim answers one per hash an hour")
        XCTAssertNotNil(passim.log.first?.range, "one contiguous range")
        XCTAssertGreaterThan(done.record.metrics?.bytesBySource["peer:127.0.0.1"] ?? 0, 0)
    }
}
