import DBus
import Foundation
import TestSupport
import XCTest

/// The fourth trust round's third finding: a caller's descriptor on a file whose reads never
/// answer (a FUSE file, `Tests/fuse/blocker.py`, mounted `allow_other`; a stuck NFS mount does the
/// same). User a hands it over as `client_certificate` five times at once: every other caller is
/// answered at once meanwhile, a's calls fail `FileError` after the deadline, and a's fifth, past
/// its four stuck reads, fails at once (before, two such calls left every user's `ListTasks`
/// unanswered for 20 s and more).
final class StuckFileTests: TwoUsersTestCase {
    func testACallersStuckFileStallsOnlyThatCaller() async throws {
        let mount = directory.file("fuse")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        let reads = directory.file("reads")
        let blocker = try ChildProcess([
            "/usr/bin/python3", Self.packageRoot.appendingPathComponent("Tests/fuse/blocker.py").path, mount, reads,
        ])
        defer {
            _ = try? ProcessRunner.runBlocking(["umount", "-l", mount])
            blocker.stop()
        }
        try await until("the FUSE file is there", seconds: 20) {
            FileManager.default.fileExists(atPath: mount + "/stuck.pem")
        }
        let aHome = try home("a", users.a)
        let replies = aHome + "/replies"
        // a: five Starts at once, each with the stuck file as its client certificate.
        let caller = try pythonProcess(
            as: users.a,
            """
            import dbus, dbus.mainloop.glib, json, os, time
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.bus.BusConnection('\(bus.address)')
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            loop = GLib.MainLoop()
            began = time.time()
            got = []
            def done(text):
                got.append([round(time.time() - began, 1), text])
                if len(got) == 5:
                    open('\(replies)', 'w').write(json.dumps(got))
                    loop.quit()
            for i in range(5):
                fd = os.open('\(mount)/stuck.pem', os.O_RDONLY)
                m.Start('\(http.url("/x"))', '\(aHome)/x%d' % i,
                        dbus.Dictionary({'client_certificate': dbus.types.UnixFd(fd)}, signature='sv'),
                        reply_handler=lambda path: done('ok'),
                        error_handler=lambda e: done(e.get_dbus_name() + ': ' + e.get_dbus_message()),
                        timeout=60)
            GLib.timeout_add(60000, loop.quit)
            loop.run()
            """)
        defer { caller.stop() }
        try await until("four of a's reads are stuck", seconds: 20) {
            ((try? String(contentsOfFile: reads, encoding: .utf8)) ?? "").split(separator: "\n").count >= 4
        }
        // Every other call is answered at once while a's reads hang: root's and b's.
        for _ in 0..<5 {
            let began = ContinuousClock.now
            _ = try await call("ListTasks", [.string("")])
            let b = try await python(
                uid: users.b.uid, gid: users.b.gid, setprivGroups: "--init-groups", "out['n'] = len(m.ListTasks(''))")
            XCTAssertEqual(b["n"] as? Int, 0)
            XCTAssertLessThan(ContinuousClock.now - began, .seconds(5), "another user's calls are answered meanwhile")
            try await Task.sleep(for: .milliseconds(300))
        }
        try await until("a's five calls were answered", seconds: 40) {
            FileManager.default.fileExists(atPath: replies)
        }
        let got = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: replies))) as? [[Any]])
        let texts = got.compactMap { $0.last as? String }
        XCTAssertEqual(
            texts.filter {
                $0.hasPrefix("org.example.Downloads.Error.FileError: client_certificate did not answer within 10 s")
            }
            .count, 4, "\(got)")
        XCTAssertEqual(
            texts.filter { $0.contains("4 reads of your files have not returned yet") }.count, 1, "\(got)")
    }
}
