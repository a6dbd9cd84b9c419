import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Calls meant to hurt the daemon: refused cheaply, answered, and nothing kept or forged.
final class AbuseTests: DaemonTestCase {
    func residentMiB() -> Int? {
        guard let pid = daemon?.pid, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") }.map { $0 / 1024 }
    }

    func testAHugeWronglyTypedCallIsRefusedByItsSignature() async throws {
        let huge = DBusValue.strings((0..<2000).map { _ in String(repeating: "x", count: 10_000) })  // 20 MB of `as`
        let other = try await Connection.open(.address(bus.address))
        defer { other.close() }
        let before = try XCTUnwrap(residentMiB())
        let sender: Connection = client
        for _ in 0..<5 {
            let refused = Task {
                try await sender.call(
                    destination: "org.example.Downloads", path: "/org/example/Downloads", interface: "org.example.Downloads",
                    method: "ListTasks", arguments: [huge], timeout: .seconds(60)
                )
            }
            // Another caller is answered meanwhile.
            let answer = try await other.call(
                destination: "org.example.Downloads", path: "/org/example/Downloads", interface: "org.example.Downloads",
                method: "ListTasks", arguments: [.string("")]
            )
            XCTAssertEqual(answer.count, 1)
            do {
                _ = try await refused.value
                XCTFail("a 20 MB 'as' was accepted by ListTasks(s)")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.freedesktop.DBus.Error.InvalidArgs")
                XCTAssertTrue(error.message.contains("takes 's', got 'as'"), error.message)
            }
        }
        let after = try XCTUnwrap(residentMiB())
        // The daemon's malloc returns large blocks (MallocTuning): not even one message stays.
        XCTAssertLessThan(after - before, 15, "five 20 MB messages are not kept (\(before) → \(after) MiB)")
        let owner = try await client.nameOwner("org.example.Downloads")
        XCTAssertNotNil(owner, "the daemon is still there")
    }

    func testCallerTextCannotForgeLogLinesAndURLCredentialsAreNotLogged() async throws {
        http.set("/f", Route(content: Self.content(100)))
        let folder = directory.file("in")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let url = http.url("/f").replacingOccurrences(of: "http://", with: "http://someone:hunter2@")
        let path = try await start(url, folder + "/a\nFORGED downloadsd: everything is fine")
        try await waitState(path, ["finished", "failed"])
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertFalse(log.contains("\nFORGED"), "a newline from a caller starts no log line")
        XCTAssertTrue(log.contains("a\\x0aFORGED"), log)
        XCTAssertFalse(log.contains("hunter2"), "URL credentials are never logged")
    }
}
