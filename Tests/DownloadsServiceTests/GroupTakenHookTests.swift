import DBus
import DownloadsService
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import XCTest

/// `Configuration.afterGroupTaken` (where downloadsd gives the heap's free memory back) runs once
/// for each StartGroup that was taken, after the group's tasks exist, and not for one refused.
final class GroupTakenHookTests: InProcessServiceTestCase {
    func testRunsOnceAGroupIsTakenAndNotForARefusedOne() async throws {
        await stopService()
        let seen = NIOLockedValueBox(0)
        serviceConfiguration.afterGroupTaken = { seen.withLockedValue { $0 += 1 } }
        try await startService()
        http.set("/a", Route(content: Array("alpha".utf8)))
        http.set("/b", Route(content: Array("bravo".utf8)))
        let entryType = DBusType.structure([.string, .string, .dictionary(key: .string, value: .variant)])
        // Files of their own per group: the first group's may be finished (in place) before
        // the second is asked, which must be refused for its URL, not for an existing file.
        func group(_ urls: [String], named name: String) async throws -> [DBusValue] {
            let entries = urls.enumerated().map { index, url in
                DBusValue.structure([.string(url), .string(directory.file("\(name)\(index).bin")), .vardict([:])])
            }
            return try await call("StartGroup", [.array(element: entryType, entries), .vardict([:])])
        }

        let reply = try await group([http.url("/a"), http.url("/b")], named: "taken")
        guard case .array(_, let tasks) = reply[1] else { return XCTFail("no task list: \(reply)") }
        XCTAssertEqual(tasks.count, 2)
        XCTAssertEqual(seen.withLockedValue { $0 }, 1)

        do {
            _ = try await group([http.url("/a"), "ftp://example/b"], named: "refused")
            XCTFail("a group with an ftp URL was taken")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", error.message)
        }
        XCTAssertEqual(seen.withLockedValue { $0 }, 1, "the hook ran for a refused group")
        let listed = try await call("ListTasks", [.string("")])
        guard case .array(_, let paths) = listed.first else { return XCTFail("no list: \(listed)") }
        XCTAssertEqual(paths.count, 2, "the refused group left tasks behind")
    }
}
