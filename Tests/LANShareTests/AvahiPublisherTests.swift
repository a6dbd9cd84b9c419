import DBus
import Foundation
import LANShare
import Logging
import NIOConcurrencyHelpers
import TestSupport
import XCTest

/// The advert as another machine of the link sees it: the publisher talks to host A's
/// avahi-daemon, and avahi-browse on host B (another network namespace, its own avahi-daemon)
/// resolves each file's subtype to A's address, the port and TXT `ranges=1`; more files than one
/// entry group takes, and the advert gone once nothing is shared.
final class AvahiPublisherTests: XCTestCase {
    func testAnotherHostOfTheLinkFindsEachFileBySubtypeAndNotOnceWithdrawn() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: makes network namespaces") }
        let rig = try AvahiRig()
        defer { rig.stop() }
        // 40 files: two entry groups (31 subtypes at most in one).
        let hashes = (0..<40).map { n in String(repeating: String(format: "%02x", n), count: 32) }
        let state = NIOLockedValueBox((hashes: hashes, port: Int?(27_511)))
        let publisher = AvahiPublisher(
            bus: .address(rig.a.busAddress), name: "Downloads-test", logger: Logger(label: "test"),
            current: { state.withLockedValue { $0 } })
        await publisher.publish()

        for hash in [hashes[0], hashes[39]] {
            let line = try await resolved(rig, AvahiPublisher.subtype(hash))
            XCTAssertTrue(line.contains(";\(rig.a.address);27511;"), line)
            XCTAssertTrue(line.contains("\"ranges=1\""), line)
            XCTAssertTrue(line.contains("\(rig.a.hostName).local"), line)
        }
        let unknown = try await rig.run(
            in: rig.b, ["avahi-browse", "-rpt", AvahiPublisher.subtype(String(repeating: "ff", count: 32))])
        XCTAssertFalse(unknown.stdout.contains("="), "a hash not shared is not found: \(unknown.stdout)")

        state.withLockedValue { $0 = (hashes: [], port: nil) }
        await publisher.publish()
        let deadline = Date().addingTimeInterval(15)
        var gone = false
        while !gone, Date() < deadline {
            let out = try await rig.run(in: rig.b, ["avahi-browse", "-pt", "_cache._tcp"])
            gone = !out.stdout.contains("Downloads-test")
            if !gone { try await Task.sleep(for: .milliseconds(200)) }
        }
        XCTAssertTrue(gone, "the advert is withdrawn once nothing is shared")
        await publisher.stop()
    }

    /// avahi-browse's resolved line for `subtype` on host B, polled until it comes.
    func resolved(_ rig: AvahiRig, _ subtype: String) async throws -> String {
        let deadline = Date().addingTimeInterval(15)
        var last = ""
        while Date() < deadline {
            let out = try await rig.run(in: rig.b, ["avahi-browse", "-rpt", subtype])
            last = out.stdout + out.stderr
            if let line = out.stdout.split(separator: "\n").first(where: { $0.hasPrefix("=") }) { return String(line) }
            try await Task.sleep(for: .milliseconds(200))
        }
        XCTFail("\(subtype) was not resolved on the other host: \(last)")
        return ""
    }
}
