import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// On the system bus the daemon is root, and the attributes are written by the user's file
/// helper, as the user, on the user's file: the finished file carries them and stays the user's.
/// Root's daemon writes no Recent for anyone (`add_to_recent` is the user's agent's there).
extension MultiUserTests {
    func testAUsersFileSaysWhereItCameFromWrittenAsThem() async throws {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let content = Self.content(120_000, seed: 65)
        http.set("/report.pdf", Route(content: content))
        let result = try await python(
            as: users.a,
            """
            path = start('\(http.url("/report.pdf"))', '\(home)/report.pdf', referrer='http://127.0.0.1/reports', add_to_recent=dbus.Boolean(True))
            out['state'] = wait(path, ['finished', 'failed'])
            out['origin'] = os.getxattr('\(home)/report.pdf', 'user.xdg.origin.url').decode()
            out['referrer'] = os.getxattr('\(home)/report.pdf', 'user.xdg.referrer.url').decode()
            quiet = start('\(http.url("/report.pdf"))', '\(home)/quiet.pdf', origin_attributes=dbus.Boolean(False))
            out['quiet'] = wait(quiet, ['finished', 'failed'])
            out['quiet_attributes'] = os.listxattr('\(home)/quiet.pdf')
            """)
        XCTAssertEqual(result["state"] as? String, "finished", daemonLogText)
        XCTAssertEqual(sha256(ofFile: home + "/report.pdf"), Self.sha256(content))
        XCTAssertEqual(result["origin"] as? String, http.url("/report.pdf"), "read back by the user")
        XCTAssertEqual(result["referrer"] as? String, "http://127.0.0.1/reports")
        XCTAssertEqual(owner(of: home + "/report.pdf")?.uid, users.a.uid, "the file is still the user's")
        XCTAssertEqual(result["quiet"] as? String, "finished")
        XCTAssertEqual((result["quiet_attributes"] as? [Any])?.count, 0, "origin_attributes false")
        // add_to_recent on the system bus is the user's agent's to do: root wrote no Recent.
        XCTAssertFalse(FileManager.default.fileExists(atPath: bus.dataDirectory + "/recently-used.xbel"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: home).sorted(), ["quiet.pdf", "report.pdf"])
    }
}
