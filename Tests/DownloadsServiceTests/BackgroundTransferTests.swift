import DBus
import Foundation
import NIOConcurrencyHelpers
import TestSupport
import XCTest

/// A `background` task on a real bottleneck (`Bottleneck`: a network namespace the test makes,
/// its loopback shaped by `tbf` to 80 Mbit/s with a 100 ms queue), the daemon, a server and a
/// competing curl inside. The task says `yielding` while curl uses the link and stops saying it
/// once curl is done, and ends with the right bytes. Skipped where namespaces cannot be made.
/// (The throughput and latency figures are the benchmark's: `make bench`, section background.)
final class BackgroundTransferTests: DaemonTestCase {
    var bottleneck: Bottleneck!

    override var launcher: [String] { bottleneck.prefix }

    override func setUp() async throws {
        do {
            bottleneck = try Bottleneck()
        } catch let error as Bottleneck.Unavailable {
            throw XCTSkip("no network namespace with tbf here: \(error)")
        }
        try await super.setUp()
    }

    override func tearDown() async throws {
        try await super.tearDown()
        bottleneck?.stop()
    }

    func testABackgroundTaskYieldsWhileAnotherDownloadRunsAndEndsRight() async throws {
        let content = Self.content(32 << 20, seed: 31)
        try bottleneck.file("long.bin", content)
        try bottleneck.file("interactive.bin", Self.content(80 << 20, seed: 32))
        let task = try await start(
            bottleneck.url("long.bin"), directory.file("long.bin"), ["background": .boolean(true)])
        let background = try await property(task, "Background")
        XCTAssertEqual(background, .boolean(true))
        try await waitBytes(task, atLeast: 2 << 20)

        // Another download on the same link: the background task gives way and says so. Seen in
        // its PropertiesChanged as well as read: a poll alone can fall between two changes.
        let said = NIOLockedValueBox([(value: String, at: Date)]())
        try await client.subscribe(
            MatchRule(
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: task
            )
        ) { message in
            guard let arguments = try? message.arguments(), arguments.count > 1,
                let waiting = arguments[1].vardictValue?["WaitingFor"]?.stringValue
            else { return }
            said.withLockedValue { $0.append((waiting, Date())) }
        }
        let saidYielding = { said.withLockedValue { $0.contains { $0.value == "yielding" } } }
        let curlStarted = Date()
        let competitor = Task { [bottleneck] in try await bottleneck!.curl("interactive.bin", seconds: 6) }
        try await until("WaitingFor says yielding while curl runs", seconds: 6) {
            if saidYielding() { return true }
            return try await property(task, "WaitingFor")?.stringValue == "yielding"
        }
        if !saidYielding() {
            // For the next reader of a failure: what the task said, seconds after curl started.
            print(
                "WaitingFor said: \(said.withLockedValue { $0.map { "\($0.value.isEmpty ? "''" : $0.value) at +\(String(format: "%.2f", $0.at.timeIntervalSince(curlStarted)))" } })"
            )
        }
        _ = try await competitor.value
        try await until("WaitingFor is empty again once curl is done", seconds: 15) {
            if try await property(task, "State")?.stringValue == "finished" { return true }
            return try await property(task, "WaitingFor")?.stringValue == ""
        }
        try await waitState(task, ["finished"], seconds: 120)
        XCTAssertEqual(sha256(ofFile: directory.file("long.bin")), Self.sha256(content))
        let ctl = PackageRoot.debugBinary("downloadsctl")
        let status = try await run([
            ctl, "--address", bus.address, "status", String(task.rawValue.split(separator: "/").last ?? ""),
        ])
        XCTAssertTrue(status.stdout.contains("background:  yes"), status.stdout)
    }
}
