import DBus
import Foundation
import LANShare
import Logging
import NIOConcurrencyHelpers
import TestSupport
import XCTest

/// Finding the peers of a file on a real link (`AvahiRig`): host A publishes as this service does
/// (TXT `ranges=1`) and as Passim does (no TXT), and an adversary advertises an address of
/// another subnet; host B's browser finds the first two, with their ports and kinds, not the
/// third, at most `limit` of them, and nothing for a hash no one has.
final class AvahiBrowserTests: XCTestCase {
    func testHostBFindsThePeersOfAFileAndOnlyThoseOnItsLink() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: makes network namespaces") }
        let rig = try AvahiRig()
        var adverts: [ChildProcess] = []
        defer {
            for advert in adverts { advert.stop(grace: 1) }
            rig.stop()
        }
        let hash = String(repeating: "5a", count: 32)
        let publisher = AvahiPublisher(
            bus: .address(rig.a.busAddress), name: "Downloads-test", logger: Logger(label: "test"),
            current: { ([hash], 27_511) })
        await publisher.publish()
        let subtype = AvahiPublisher.subtype(hash)
        func advertise(_ arguments: [String]) throws {
            adverts.append(
                try ChildProcess(
                    ["ip", "netns", "exec", rig.a.namespace, "avahi-publish"] + arguments,
                    environment: ["DBUS_SYSTEM_BUS_ADDRESS": rig.a.busAddress]))
        }
        try advertise(["-s", "--subtype=\(subtype)", "Passim-1234", "_cache._tcp", "27500"])
        try advertise(["-a", "-R", "elsewhere.local", "10.99.0.5"])
        try advertise([
            "-s", "-H", "elsewhere.local", "--subtype=\(subtype)", "Elsewhere", "_cache._tcp", "27500", "ranges=1",
        ])

        // Every advert reached B (the adversary's too) before the browser is asked.
        var seen = ""
        let advertised = Date().addingTimeInterval(20)
        while Date() < advertised {
            seen = try await rig.run(in: rig.b, ["avahi-browse", "-rpt", subtype]).stdout
            if seen.contains("10.99.0.5"), seen.contains("Passim-1234"), seen.contains("Downloads-test") { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        XCTAssertTrue(seen.contains("10.99.0.5"), "the adversary's advert reached B: \(seen)")
        // The browser runs in this process's namespace, not B's: B's link is the rig's subnet.
        let subnet = String(rig.a.address.dropLast(1))
        let browser = AvahiBrowser(
            bus: .address(rig.b.busAddress), logger: Logger(label: "test"),
            onLink: { address, _ in address.hasPrefix(subnet) })
        let peers = try await browser.find(hash)
        let byName = Dictionary(peers.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(Set(byName.keys), ["Downloads-test", "Passim-1234"], "\(peers)")
        XCTAssertEqual(byName["Downloads-test"]?.address, rig.a.address)
        XCTAssertEqual(byName["Downloads-test"]?.port, 27_511)
        XCTAssertEqual(byName["Downloads-test"]?.takesRanges, true)
        XCTAssertEqual(byName["Passim-1234"]?.port, 27_500)
        XCTAssertEqual(byName["Passim-1234"]?.takesRanges, false, "a Passim peer: one GET an hour")
        XCTAssertEqual(byName["Downloads-test"]?.description, "peer:\(rig.a.address)")
        XCTAssertEqual(
            byName["Downloads-test"]?.url(sha256: hash, name: "a b.iso"),
            "https://\(rig.a.address):27511/a%20b.iso?sha256=\(hash)")

        let one = try await browser.find(hash, limit: 1)
        XCTAssertEqual(one.count, 1, "at most the limit")
        let started = Date()
        let none = try await browser.find(String(repeating: "00", count: 32))
        XCTAssertEqual(none, [])
        XCTAssertLessThan(Date().timeIntervalSince(started), 3.5, "ended by AllForNow or the timeout")

        // As a running download listens: each peer as it is found, and one that leaves.
        let found = NIOLockedValueBox<Set<String>>([])
        let stream = browser.peers(hash)
        let watcher = Task { () -> LANPeer? in
            for await event in stream {
                switch event {
                case .found(let peer): found.withLockedValue { _ = $0.insert(peer.name) }
                case .gone(let peer): return peer
                case .allForNow: break
                }
            }
            return nil
        }
        let deadline = Date().addingTimeInterval(20)
        while found.withLockedValue({ $0.count }) < 2, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTAssertEqual(found.withLockedValue { $0 }, ["Downloads-test", "Passim-1234"])
        adverts[0].stop(grace: 1)
        let timeout = Task {
            try? await Task.sleep(for: .seconds(20))
            watcher.cancel()
        }
        let gone = await watcher.value
        timeout.cancel()
        XCTAssertEqual(gone?.name, "Passim-1234", "its advert withdrawn: gone")

        // An advert flood: forty more machines claim the file; a few are taken.
        for n in 0..<40 {
            try advertise(["-s", "--subtype=\(subtype)", "Flood-\(n)", "_cache._tcp", String(30_000 + n), "ranges=1"])
        }
        let flooded = Date().addingTimeInterval(20)
        while Date() < flooded {
            let listed = try await rig.run(in: rig.b, ["avahi-browse", "-pt", subtype]).stdout
            if listed.components(separatedBy: "Flood-").count > 40 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        let few = try await browser.find(hash)
        XCTAssertEqual(few.count, 8, "at most 8 of \(41) adverts: \(few.map(\.name))")
        await publisher.stop()
    }

    func testAnAddressIsOnTheLinkOfTheInterfaceWhoseNetworkHoldsIt() {
        let loopback = Int32(if_nametoindex("lo"))
        XCTAssertTrue(LinkCheck.isOnLink("127.0.0.1", interface: loopback))
        XCTAssertTrue(LinkCheck.isOnLink("127.9.9.9", interface: loopback))
        XCTAssertFalse(LinkCheck.isOnLink("10.1.2.3", interface: loopback))
        XCTAssertFalse(LinkCheck.isOnLink("127.0.0.1", interface: 999_999), "no such interface")
        XCTAssertFalse(LinkCheck.isOnLink("fe80::1", interface: loopback), "IPv4 only")
        XCTAssertTrue(LinkCheck.isLoopback("127.0.0.2"))
        XCTAssertTrue(LinkCheck.isLoopback("::1"))
        XCTAssertFalse(LinkCheck.isLoopback("10.0.0.1"))
    }
}
