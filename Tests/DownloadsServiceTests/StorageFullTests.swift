import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The state directory on a small tmpfs the test mounts, filled while the daemon works (as a
/// download does when `~/Downloads` and `~/.local/state` share a disk): the store's failure is
/// the caller's (`StorageFull`, nothing changed), a running task whose checkpoint cannot be
/// recorded pauses, and after a restart every task is as the caller was told.
final class StorageFullTests: DaemonTestCase {
    var small: TemporaryDirectory!

    override var stateDirectory: String { small.path + "/state" }

    override func setUp() async throws {
        small = try TemporaryDirectory(prefix: "small-state")
        let mounted = try ProcessRunner.runBlocking([
            "mount", "-t", "tmpfs", "-o", "size=12m,mode=0700", "tmpfs", small.path,
        ])
        guard mounted.status == 0 else {
            small.remove()
            throw XCTSkip("cannot mount a small tmpfs here: \(mounted.stderr)")
        }
        try await super.setUp()
    }

    override func tearDown() async throws {
        // A failure shows the state directory (and, from DaemonTestCase, the daemon's log).
        if (testRun?.failureCount ?? 0) > 0 {
            print((try? ProcessRunner.runBlocking(["ls", "-ls", small.path, stateDirectory]))?.stdout ?? "")
        }
        try await super.tearDown()
        if let small {
            _ = try? ProcessRunner.runBlocking(["umount", "-l", small.path])
            small.remove()
        }
    }

    var filler: String { small.path + "/filler" }

    /// Fills the file system (dd stops at ENOSPC).
    func fill() throws {
        _ = try ProcessRunner.runBlocking(["dd", "if=/dev/zero", "of=\(filler)", "bs=64k"], timeout: 60)
    }

    func unfill() {
        unlink(filler)
    }

    func errorName(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as BusError {
            return error.name
        } catch {
            return "\(error)"
        }
    }

    func state(_ path: ObjectPath) async throws -> String? { try await property(path, "State")?.stringValue }

    func tasks() async throws -> [ObjectPath] {
        try await call("ListTasks", [.string("")]).first?.objectPathArrayValue ?? []
    }

    func testAFullStateDirectoryRefusesNewWorkRecordsWhatEndsAndLosesNothing() async throws {
        let content = Self.content(3_000_000, seed: 21)
        var slow = Route(content: content)
        slow.bytesPerSecond = 300_000
        http.set("/slow", slow)
        http.set("/quick", Route(content: Self.content(2000, seed: 22)))
        let running = try await start(http.url("/slow"), directory.file("slow.bin"))
        let held = try await start(http.url("/slow"), directory.file("held.bin"))
        try await waitBytes(held, atLeast: 100_000)
        _ = try await call("Pause", [.objectPath(held)])
        try await waitBytes(running, atLeast: 400_000)

        try fill()
        // New work is refused before anything changes.
        let refused = await errorName {
            _ = try await self.start(self.http.url("/quick"), self.directory.file("quick.bin"))
        }
        XCTAssertEqual(refused, "org.example.Downloads.Error.StorageFull")
        let listed = try await tasks()
        XCTAssertEqual(Set(listed), [running, held])
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("quick.bin")))
        // Cancelling still works on the full disk: the reserve beside the database records it.
        _ = try await call("Cancel", [.objectPath(held)])
        let heldState = try await state(held)
        XCTAssertEqual(heldState, "cancelled")
        // The disk fills again (the reserve's room taken too): the running task's next
        // checkpoint cannot be recorded, and it pauses instead of racing on.
        try fill()
        try await waitState(running, ["paused"], seconds: 30)
        // With neither reserve nor room, a Cancel is refused and changes nothing.
        let cancel = await errorName { _ = try await self.call("Cancel", [.objectPath(running)]) }
        XCTAssertEqual(cancel, "org.example.Downloads.Error.StorageFull")
        let stillPaused = try await state(running)
        XCTAssertEqual(stillPaused, "paused")

        // After a restart: nothing came back (the cancelled task stays cancelled), nothing is new,
        // and the task whose Cancel was refused is not cancelled.
        killDaemon()
        try await startDaemon()
        let restored = try await tasks()
        XCTAssertEqual(Set(restored), [running, held])
        let afterHeld = try await state(held)
        XCTAssertEqual(afterHeld, "cancelled")
        let afterRunning = try await state(running) ?? ""
        XCTAssertTrue(["queued", "running", "retrying", "paused"].contains(afterRunning), afterRunning)

        // Room again: the paused task carries on from what was durable and finishes.
        unfill()
        // (After the restart it ran again and may have paused again while the disk was full.)
        try await until("the task finishes once there is room", seconds: 60) {
            let now = try await self.state(running) ?? ""
            if now == "paused" { _ = try? await self.call("Resume", [.objectPath(running)]) }
            return now == "finished"
        }
        XCTAssertEqual(sha256(ofFile: directory.file("slow.bin")), Self.sha256(content))
        let quick = try await start(http.url("/quick"), directory.file("quick.bin"))
        try await waitState(quick, ["finished"])
    }
}
