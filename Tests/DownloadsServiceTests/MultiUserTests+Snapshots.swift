import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `snapshot` on the system bus: root's copy of a user's file is exactly the file recorded at the
/// call (a user who extends a sparse file while it is copied cannot make it larger), and the
/// copies count against the user's budget (`--max-snapshot-bytes-per-user`), each user's apart.
extension MultiUserTests {
    func restartWithSnapshotBudget(_ bytes: Int) async throws {
        helperArguments = ["--max-snapshot-bytes-per-user", String(bytes)]
        stopDaemon()
        try await startDaemon()
    }

    func testSnapshotsCountAgainstTheirUsersBudget() async throws {
        try await restartWithSnapshotBudget(10_000_000)
        http.set("/inbox", Route.receiving())
        let homeA = try makeDirectory("a", owner: users.a, mode: 0o700)
        let homeB = try makeDirectory("b", owner: users.b, mode: 0o700)
        let later = Int(Date().timeIntervalSince1970) + 86_400
        let upload = """
            def upload(path):
                return err(lambda: m.Upload('\(http.url("/inbox"))', path, dbus.Dictionary(
                    {'snapshot': True, 'earliest_begin': dbus.UInt64(\(later))}, signature='sv')))
            """
        let a = try await python(
            as: users.a,
            """
            \(upload)
            with open('\(homeA)/six.bin', 'wb') as f: f.write(os.urandom(6000000))
            out['first'] = upload('\(homeA)/six.bin')
            out['second'] = upload('\(homeA)/six.bin')
            call(out['first'][3:], 'Cancel')
            out['after_cancel'] = upload('\(homeA)/six.bin')
            """)
        XCTAssertTrue((a["first"] as? String)?.hasPrefix("ok:") == true, "\(a)")
        let second = try XCTUnwrap(a["second"] as? String)
        XCTAssertTrue(second.hasPrefix("org.example.Downloads.Error.QuotaExceeded"), second)
        XCTAssertTrue(second.contains("--max-snapshot-bytes-per-user"), second)
        XCTAssertTrue(
            (a["after_cancel"] as? String)?.hasPrefix("ok:") == true, "a cancelled upload's copy no longer counts: \(a)"
        )
        let b = try await python(
            as: users.b,
            """
            \(upload)
            with open('\(homeB)/six.bin', 'wb') as f: f.write(os.urandom(6000000))
            out['b'] = upload('\(homeB)/six.bin')
            """)
        XCTAssertTrue((b["b"] as? String)?.hasPrefix("ok:") == true, "B has a budget of its own: \(b)")
    }

    /// The issue's attack: a sparse file extended with truncate while root copies it. The copy
    /// is never more than what was recorded: the call is refused (`SourceChanged`, or over the
    /// budget), or the copy is exactly the size the task records.
    func testASnapshotOfAFileThatGrowsWhileCopiedIsNeverLargerThanRecorded() async throws {
        try await restartWithSnapshotBudget(100_000_000)
        http.set("/inbox", Route.receiving())
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let later = Int(Date().timeIntervalSince1970) + 86_400
        let result = try await python(
            as: users.a,
            """
            import threading
            path = '\(home)/sparse.bin'
            with open(path, 'wb') as f: f.truncate(8000000)
            stop = threading.Event()
            def grow():
                size = 8000000
                while not stop.is_set() and size < 3000000000:
                    size += 4000000
                    os.truncate(path, size)
                    time.sleep(0.001)
            grower = threading.Thread(target=grow)
            grower.start()
            out['upload'] = err(lambda: m.Upload('\(http.url("/inbox"))', path, dbus.Dictionary(
                {'snapshot': True, 'earliest_begin': dbus.UInt64(\(later))}, signature='sv')))
            stop.set()
            grower.join()
            out['final'] = os.stat(path).st_size
            if out['upload'].startswith('ok:'):
                out['expected'] = int(prop(out['upload'][3:], 'BytesExpected'))
            """)
        let outcome = try XCTUnwrap(result["upload"] as? String)
        let copies = ((try? FileManager.default.contentsOfDirectory(atPath: stateDirectory + "/uploads")) ?? [])
            .compactMap {
                try? FileManager.default.attributesOfItem(atPath: stateDirectory + "/uploads/" + $0)[.size] as? Int
            }
        XCTAssertGreaterThan(result["final"] as? Int ?? 0, 8_000_000, "the file grew")
        if outcome.hasPrefix("ok:") {
            XCTAssertEqual(copies, [result["expected"] as? Int ?? -1], "the copy is exactly what the task records")
            XCTAssertLessThanOrEqual(copies.first ?? 0, 100_000_000)
        } else {
            XCTAssertTrue(
                outcome.hasPrefix("org.example.Downloads.Error.SourceChanged")
                    || outcome.hasPrefix("org.example.Downloads.Error.QuotaExceeded"),
                outcome
            )
            XCTAssertEqual(copies, [], "a refused copy leaves nothing")
        }
    }
}
