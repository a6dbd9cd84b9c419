import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `downloadsctl set`: a task's priority, limit and headers changed while it runs, and `status`
/// showing them with the service's speed.
extension DownloadsctlTests {
    func testSetChangesARunningTaskAndStatusShowsItsSpeed() async throws {
        var slow = Route(content: Self.content(4_000_000, seed: 311))
        slow.bytesPerSecond = 1_000_000
        http.set("/slow", slow)
        let started = try await ctl(["start", http.url("/slow"), "-o", directory.file("slow.bin")])
        XCTAssertEqual(started.status, 0, started.description)
        let id = started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let set = try await ctl([
            "set", id, "--priority", "high", "--limit-rate", "512K", "--header", "X-Token: new", "--title", "Nightly",
        ])
        XCTAssertEqual(set.status, 0, set.description)
        XCTAssertEqual(set.stdout, "updated task \(id): headers, max_bytes_per_second, priority, title\n")
        try await until("a speed to show", seconds: 20) {
            let status = try await self.ctl(["status", id])
            return status.stdout.contains("speed:       ") && !status.stdout.contains("speed:       0 B/s")
        }
        let status = try await ctl(["status", id])
        XCTAssertTrue(status.stdout.contains("priority:    high"), status.stdout)
        XCTAssertTrue(status.stdout.contains("limit:       512 KiB/s"), status.stdout)
        XCTAssertTrue(status.stdout.contains("title:       Nightly"), status.stdout)
        XCTAssertTrue(status.stdout.contains(" left"), "an ETA: \(status.stdout)")
        let refused = try await ctl(["set", id, "--priority", "urgent"])
        XCTAssertEqual(refused.status, 64, refused.description)
        let nothing = try await ctl(["set", id])
        XCTAssertEqual(nothing.status, 64, nothing.description)
        _ = try await ctl(["cancel", id])
    }
}
