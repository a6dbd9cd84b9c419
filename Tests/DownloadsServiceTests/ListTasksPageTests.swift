import DBus
import DownloadsClient
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `ListTasksPage` through the daemon on a private bus: the caller's tasks a page at a time, in id
/// order, the pages together what `ListTasks` lists, a session's alone, through a restart (the
/// store's rows read back with their options shared), and every bad limit refused.
final class ListTasksPageTests: DaemonTestCase {
    func page(_ session: String, after: UInt64, limit: UInt32) async throws -> ([ObjectPath], UInt64) {
        let reply = try await call("ListTasksPage", [.string(session), .uint64(after), .uint32(limit)])
        return (reply.first?.objectPathArrayValue ?? [], reply.last?.uint64Value ?? .max)
    }

    func allPages(_ session: String, limit: UInt32) async throws -> [ObjectPath] {
        var listed: [ObjectPath] = []
        var after: UInt64 = 0
        repeat {
            let (tasks, next) = try await page(session, after: after, limit: limit)
            XCTAssertLessThanOrEqual(tasks.count, Int(limit))
            listed += tasks
            XCTAssertTrue(next == 0 || next == UInt64(tasks.last?.rawValue.split(separator: "/").last ?? "") ?? 0)
            after = next
        } while after != 0
        return listed
    }

    func testPagesListEveryTaskOnceInIdOrderThroughARestart() async throws {
        http.set("/f", Route(content: Self.content(100)))
        let ahead = DBusValue.uint64(UInt64(Date().timeIntervalSince1970) + 86_400)
        let entries = (0..<25).map {
            DBusValue.structure([.string(http.url("/f")), .string(directory.file("g\($0)")), .vardict([:])])
        }
        _ = try await call(
            "StartGroup",
            [
                .array(element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]), entries),
                .vardict([
                    "session": .string("images"), "earliest_begin": ahead,
                    "metadata": .vardict(["set": .string("images")]),
                ]),
            ])
        for index in 0..<3 {
            _ = try await start(
                http.url("/f"), directory.file("s\(index)"), ["session": .string("other"), "earliest_begin": ahead])
        }
        let listed = try await call("ListTasks", [.string("")]).first?.objectPathArrayValue ?? []
        XCTAssertEqual(listed.count, 28)
        let paged = try await allPages("", limit: 10)
        XCTAssertEqual(paged, listed, "the pages are ListTasks' list, in its order")
        let whole = try await allPages("", limit: 28)
        XCTAssertEqual(whole, listed, "one full page, then none")
        let (_, next) = try await page("", after: 0, limit: 28)
        XCTAssertEqual(next, 0, "nothing after a page that holds them all")
        let other = try await allPages("other", limit: 2)
        XCTAssertEqual(other, Array(listed.suffix(3)), "a session's own")
        let none = try await allPages("none", limit: 5)
        XCTAssertEqual(none, [])

        // The client library's page, as an app pages.
        let proxy = DownloadsProxy(connection: client, proxies: nil)
        let first = try await proxy.listTasksPage(session: "images", limit: 20)
        XCTAssertEqual(first.tasks, Array(listed.prefix(20)))
        let second = try await proxy.listTasksPage(session: "images", after: first.next, limit: 20)
        XCTAssertEqual(second.tasks, Array(listed[20..<25]))
        XCTAssertEqual(second.next, 0)

        // busctl, as a person pages.
        let busctl = try await run([
            "busctl", "--address=\(bus.address)", "call", "org.example.Downloads", "/org/example/Downloads",
            "org.example.Downloads", "ListTasksPage", "stu", "other", "0", "2",
        ])
        XCTAssertEqual(busctl.status, 0, busctl.description)
        XCTAssertTrue(
            busctl.stdout.hasPrefix("aot 2 \"\(listed[25].rawValue)\" \"\(listed[26].rawValue)\""), busctl.stdout)

        // The store's rows read back: every file of the group with the group's metadata.
        stopDaemon()
        try await startDaemon()
        let restored = try await allPages("", limit: 7)
        XCTAssertEqual(restored, listed)
        let found = try await call("FindTasks", [.vardict(["set": .string("images")])]).first?.objectPathArrayValue
        XCTAssertEqual(found, Array(listed.prefix(25)))
        let waiting = try await property(listed[24], "WaitingFor")
        XCTAssertEqual(waiting, .string("begin-time"))

        for limit: UInt32 in [0, 10_001] {
            do {
                _ = try await page("", after: 0, limit: limit)
                XCTFail("limit \(limit) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument")
                XCTAssertEqual(error.message, "limit is 1 to 10000 tasks")
            }
        }
        do {
            _ = try await call("ListTasksPage", [.string(""), .uint32(0), .uint32(10)])
            XCTFail("a wrong signature was taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.freedesktop.DBus.Error.InvalidArgs", error.message)
        }
    }
}
