import DownloadEngine
import DownloadModel
import ProxyRules
import TestHTTPServer
import XCTest

/// `deniedNetworks`: every hop's address is checked before connecting, names are resolved once
/// and the connection pinned to a checked address; root's tasks are not held to the list.
final class NetworkPolicyTests: EngineTestCase {
    func testNetworkRanges() throws {
        let linkLocal = try XCTUnwrap(NetworkRange("169.254.0.0/16"))
        XCTAssertTrue(linkLocal.contains("169.254.169.254"))
        XCTAssertTrue(linkLocal.contains("::ffff:169.254.169.254"), "an IPv4-mapped address is its IPv4 address")
        XCTAssertFalse(linkLocal.contains("169.255.0.1"))
        XCTAssertFalse(linkLocal.contains("fe80::1"))
        XCTAssertTrue(try XCTUnwrap(NetworkRange("fe80::/10")).contains("[fe80::1]"))
        XCTAssertTrue(try XCTUnwrap(NetworkRange("febf::1/128")).contains("febf::1"))
        XCTAssertTrue(try XCTUnwrap(NetworkRange("0.0.0.0/0")).contains("8.8.8.8"))
        // 0.0.0.0/8 and :: are this host when connected to: denied with the loopback (issue 45).
        let loopback = try XCTUnwrap(NetworkRange("127.0.0.0/8")), loopback6 = try XCTUnwrap(NetworkRange("::1/128"))
        for local in ["0.0.0.0", "0.1.2.3", "::", "[0::0]", "::ffff:0.0.0.0", "[::ffff:0.0.0.0]"] {
            XCTAssertTrue(loopback.contains(local), local)
            XCTAssertTrue(loopback6.contains(local), local)
            XCTAssertFalse(linkLocal.contains(local), "not in a network without the loopback: \(local)")
        }
        XCTAssertTrue(loopback.contains("::ffff:127.0.0.1"))
        XCTAssertFalse(loopback.contains("::2"))
        XCTAssertFalse(loopback.contains("1.0.0.0"))
        XCTAssertEqual(NetworkRange("10.1.2.3/8")?.description, "10.0.0.0/8")
        XCTAssertEqual(NetworkRange("127.0.0.1")?.description, "127.0.0.1/32")
        for bad in [
            "", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/+8", "example.com/8", "fe80::/129", "10.0.0/8", "10.0.0.0/",
        ] {
            XCTAssertNil(NetworkRange(bad), bad)
        }
    }

    func testDeniedAddressIsRefusedBeforeConnectingButNotForRoot() async throws {
        await manager.shutdown()
        manager = makeManager { $0.deniedNetworks = [NetworkRange("127.0.0.0/8")!, NetworkRange("::1/128")!] }
        server.set("/x", Route(content: Self.content(1000)))
        let user = try start("/x")
        let failed = try await wait(user, for: [.finished, .failed])
        XCTAssertEqual(failed.record.errorName, "AccessDenied")
        XCTAssertEqual(
            failed.record.errorMessage, "127.0.0.1 is in a network this service does not reach for you (127.0.0.0/8)")
        XCTAssertEqual(server.requests(for: "/x").count, 0, "not even a connection")
        XCTAssertEqual(leftovers(), [])
        let root = try manager.create(
            DownloadRequest(
                owner: 0, session: "s", url: server.url("/x"), destination: directory.file("root"),
                destinationIsDirectory: false
            ))
        nextID += 1
        let done = try await wait(root.id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished, "root's downloads are not held to the list")
    }

    func testNamesAreResolvedAndPinnedToAnAllowedAddress() async throws {
        let content = Self.content(20_000)
        server.set("/x", Route(content: content))
        let url = server.url("/x").replacingOccurrences(of: "127.0.0.1", with: "localhost")
        // localhost is 127.0.0.1 and ::1: with ::1 denied, the download goes to 127.0.0.1.
        await manager.shutdown()
        manager = makeManager { $0.deniedNetworks = [NetworkRange("::1/128")!] }
        let allowed = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: url, destination: directory.file("pinned"),
                destinationIsDirectory: false
            ))
        let done = try await wait(allowed.id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
        XCTAssertEqual(sha256(ofFile: directory.file("pinned")), Self.sha256(content))
        await manager.shutdown()
        manager = makeManager { $0.deniedNetworks = [NetworkRange("127.0.0.0/8")!, NetworkRange("::1/128")!] }
        let denied = try manager.create(
            DownloadRequest(
                owner: Self.owner, session: "s", url: url, destination: directory.file("denied"),
                destinationIsDirectory: false
            ))
        let failed = try await wait(denied.id, for: [.finished, .failed])
        XCTAssertEqual(failed.record.errorName, "AccessDenied")
        XCTAssertTrue(
            failed.record.errorMessage?.hasPrefix("every address of localhost is in a network") == true,
            failed.record.errorMessage ?? "")
    }

    func testEveryRedirectHopIsChecked() async throws {
        await manager.shutdown()
        manager = makeManager { $0.deniedNetworks = [NetworkRange("127.0.0.2/32")!] }
        var hop = Route(content: [])
        hop.redirect = (302, server.url("/final").replacingOccurrences(of: "127.0.0.1", with: "127.0.0.2"))
        server.set("/hop", hop)
        server.set("/final", Route(content: Self.content(100)))
        let id = try start("/hop")
        let failed = try await wait(id, for: [.finished, .failed])
        XCTAssertEqual(failed.record.errorName, "AccessDenied", failed.record.errorMessage ?? "")
        XCTAssertEqual(server.requests(for: "/hop").count, 1)
    }
}
