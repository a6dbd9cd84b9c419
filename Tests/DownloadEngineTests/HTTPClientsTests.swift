import Crypto
@testable import DownloadEngine
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Which client a request takes: pinned clients kept per (owner, host, port, address, kind) and
/// shared while they are used, shut down once idle; IPv6 loopback.
final class HTTPClientsTests: EngineTestCase {
    func testAPinnedClientIsSharedByItsOwnersRequestsAndShutDownOnceIdle() async throws {
        let clients = HTTPClients(connectTimeout: 5, caFile: nil, connectionsPerHost: 4, idleTimeout: .milliseconds(50))
        let a = clients.lease(.multiplexed, owner: 1000, host: "example.test", port: 443, address: "127.0.0.1")
        let b = clients.lease(.multiplexed, owner: 1000, host: "example.test", port: 443, address: "127.0.0.1")
        let otherOwner = clients.lease(.multiplexed, owner: 1001, host: "example.test", port: 443, address: "127.0.0.1")
        let otherKind = clients.lease(.separate, owner: 1000, host: "example.test", port: 443, address: "127.0.0.1")
        XCTAssertTrue(a.client === b.client)
        XCTAssertFalse(a.client === otherOwner.client)
        XCTAssertFalse(a.client === otherKind.client)
        XCTAssertEqual(clients.pinnedCount, 3)
        for lease in [a, otherOwner, otherKind] { clients.release(lease) }
        try await Task.sleep(for: .milliseconds(120))
        clients.reap()
        XCTAssertEqual(clients.pinnedCount, 1, "the client still leased by b stays")
        clients.release(b)
        let deadline = ContinuousClock.now + .seconds(10)
        while clients.pinnedCount > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(clients.pinnedCount, 0, "an idle client is shut down by itself")
        await clients.shutdown()
    }

    func testDownloadsOfAnOwnerHeldToDeniedNetworksShareOneConnection() async throws {
        // Pinning happens for a host name: serve on the address "localhost" resolves to first.
        let address = try XCTUnwrap(try AddressResolver.resolveBlocking("localhost", port: 80).first)
        let local = try TestHTTPServer(host: address)
        defer { local.stop() }
        await manager.shutdown()
        manager = makeManager { $0.deniedNetworks = [NetworkRange("10.0.0.0/8")].compactMap { $0 } }
        var contents: [[UInt8]] = []
        for n in 0..<8 {
            let content = Self.content(10_000 + n, seed: UInt32(n))
            contents.append(content)
            local.set("/f\(n)", Route(content: content))
            let id = try manager.create(DownloadRequest(
                owner: Self.owner, session: "s", url: "http://localhost:\(local.port)/f\(n)",
                destination: directory.file("f\(n)"), destinationIsDirectory: false
            )).id
            let done = try await wait(id, for: [.finished, .failed])
            XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
            XCTAssertEqual(sha256(ofFile: directory.file("f\(n)")), Self.sha256(content))
        }
        XCTAssertEqual(Set(local.requests.map(\.connection)).count, 1, "one TCP connection for eight downloads")
        XCTAssertEqual(manager.clients.pinnedCount, 1)
    }

    func testIPv6Loopback() async throws {
        let six = try TestHTTPServer(host: "::1")
        defer { six.stop() }
        let content = Self.content(300_000, seed: 6)
        six.set("/six", Route(content: content))
        for connections in [1, 4] {
            var options = DownloadOptions()
            options.connections = connections
            let target = directory.file("six-\(connections)")
            let id = try manager.create(DownloadRequest(
                owner: Self.owner, session: "s", url: six.url("/six"), destination: target, destinationIsDirectory: false,
                options: options
            )).id
            let done = try await wait(id, for: [.finished, .failed])
            XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
            XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        }
        XCTAssertTrue(six.url("/six").hasPrefix("http://[::1]:"))
    }
}
