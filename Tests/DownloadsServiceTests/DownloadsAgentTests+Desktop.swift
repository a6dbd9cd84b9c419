import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The agent's part in where people look: a finished download's notification offers "Show in
/// folder" (the desktop's `org.freedesktop.FileManager1.ShowItems`, played by
/// `Tests/desktop/file_manager1.py`), and for the system service, which runs as root and never
/// writes a user's files, the user's agent adds the file to the user's Recent.
extension DownloadsAgentTests {
    func recentItems(_ file: String) async throws -> [String: [Any]] {
        let script = PackageRoot.url.appendingPathComponent("Tests/desktop/recent_files.py").path
        let output = try await run(["/usr/bin/python3", script, "list", file])
        XCTAssertEqual(output.status, 0, output.description)
        return try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: [Any]] ?? [:]
    }

    var agentRecent: String { directory.file("data/recently-used.xbel") }
    var daemonRecent: String { bus.dataDirectory + "/recently-used.xbel" }

    func testShowInFolderAsksTheFileManager() async throws {
        try await startNotificationDaemon()
        let log = directory.file("file-manager.log")
        _ = try await startOnDesktop(
            ["/usr/bin/python3", PackageRoot.url.appendingPathComponent("Tests/desktop/file_manager1.py").path, log],
            name: "org.freedesktop.FileManager1")
        try await startAgent()
        http.set("/f", Route(content: Self.content(3000)))
        let target = directory.file("my report.pdf")
        let task = try await start(http.url("/f"), target)
        try await waitState(task, ["finished"])
        try await until("the notification", log: agentLog) { self.notificationLog.contains("Download finished") }
        let finished = try XCTUnwrap(notificationLog.split(separator: "\n").first { $0.contains("Download finished") })
        XCTAssertTrue(finished.contains("\"show-in-folder\", \"Show in folder\""), String(finished))
        try await click(notification: 1, action: "show-in-folder")
        try await until("ShowItems called", log: agentLog) {
            (try? String(contentsOfFile: log, encoding: .utf8))?.contains("ShowItems") == true
        }
        let call = try XCTUnwrap(
            try JSONSerialization.jsonObject(
                with: Data(String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")[0].utf8))
                as? [String: Any])
        XCTAssertEqual(call["uris"] as? [String], [FileURIText.of(target)])
        XCTAssertNil(
            try? String(contentsOfFile: directory.file("opened"), encoding: .utf8), "the file itself was not opened")
    }

    /// The agent of a service on the session bus leaves Recent to the service (the user's own
    /// process already): one entry, written by the daemon, none by the agent.
    func testAgentOfAPerUserServiceLeavesRecentToIt() async throws {
        guard !(self is SystemBusAgentTests) else { throw XCTSkip("the per-user service's case") }
        try await startAgent()
        http.set("/f", Route(content: Self.content(3000)))
        let task = try await start(http.url("/f"), directory.file("song.ogg"), ["add_to_recent": .boolean(true)])
        try await waitState(task, ["finished"])
        try await until("the daemon adds it") { try await self.recentItems(self.daemonRecent).count == 1 }
        let agents = try await recentItems(agentRecent)
        XCTAssertEqual(agents.count, 0, "the agent wrote nothing")
    }
}

extension SystemBusAgentTests {
    /// Root's daemon writes nothing of a user's; the user's agent adds the file asked for, with
    /// the app that started it, and only that one.
    func testTheAgentAddsASystemServicesFileToTheUsersRecent() async throws {
        try await startAgent()
        http.set("/f", Route(content: Self.content(3000)))
        let asked = try await start(
            http.url("/f"), directory.file("asked.ogg"),
            ["add_to_recent": .boolean(true), "desktop_entry": .string("org.example.Player.desktop")])
        let quiet = try await start(http.url("/f"), directory.file("quiet.ogg"))
        try await waitState(asked, ["finished"])
        try await waitState(quiet, ["finished"])
        let uri = FileURIText.of(directory.file("asked.ogg"))
        try await until("the agent adds it", log: agentLog) { try await self.recentItems(self.agentRecent)[uri] != nil }
        let items = try await recentItems(agentRecent)
        XCTAssertEqual(items[uri]?.last as? [String], ["org.example.Player"])
        XCTAssertEqual(items.count, 1, "only the task that asked: \(items.keys.sorted())")
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemonRecent), "root's daemon wrote no Recent")
    }
}

extension DownloadsAgentTests {
    /// The fourth trust round's first finding, for the agent: another connection's `Finished` and
    /// `Failed` for a running task, broadcast and sent to every connection, show nothing (before,
    /// "Download finished" at 20 %, and a "sign in again at https://evil.example" the attacker wrote).
    func testForgedSignalsShowNoNotification() async throws {
        try await startNotificationDaemon()
        try await startAgent()
        var slow = Route(content: Self.content(1_200_000, seed: 9))
        slow.bytesPerSecond = 600_000
        http.set("/slow.bin", slow)
        let task = try await start(http.url("/slow.bin"), directory.file("slow.bin"))
        try await waitBytes(task, atLeast: 200_000)
        try await forgeManagerSignal("Finished", [.objectPath(task), .string("/etc/shadow")])
        try await forgeManagerSignal(
            "Failed",
            [
                .objectPath(task), .string("org.example.Downloads.Error.HTTPError"),
                .string("sign in again at https://evil.example"), .bytes([]),
            ])
        try await waitState(task, ["finished"], seconds: 30)
        try await until("the real notification", log: agentLog) { self.notificationLog.contains("Download finished") }
        let log = notificationLog
        XCTAssertFalse(log.contains("evil.example"), log)
        XCTAssertFalse(log.contains("shadow"), log)
        XCTAssertEqual(log.components(separatedBy: "Download finished").count - 1, 1, log)
    }
}
