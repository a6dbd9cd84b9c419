import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `share` on the system bus: a user's finished file is offered and read through that user's
/// file helper (a directory only the user can enter), listed and withdrawn by that user alone;
/// another user's `ListShared` shows nothing of it and its `Unshare` answers as for a hash never
/// shared.
extension MultiUserTests {
    func testASharedFileIsItsOwnersToListAndWithdraw() async throws {
        let port = try FreePort.pick()
        helperArguments = ["--share-port", String(port)]
        stopDaemon()
        try await startDaemon()
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let content = Self.content(500_000, seed: 780)
        let hash = Self.sha256(content)
        http.set("/shared.bin", Route(content: content))
        let a = try await python(
            as: users.a,
            """
            path = start('\(http.url("/shared.bin"))', '\(home)/shared.bin', checksum='sha256:\(hash)', share=True)
            out['state'] = wait(path, ['finished', 'failed'])
            deadline = time.time() + 10
            while time.time() < deadline and len(m.ListShared()) == 0: time.sleep(0.05)
            out['listed'] = [str(f['sha256']) for f in m.ListShared()]
            """)
        XCTAssertEqual(a["state"] as? String, "finished", "\(a)")
        XCTAssertEqual(a["listed"] as? [String], [hash], "\(a)")

        let b = try await python(
            as: users.b,
            """
            out['listed'] = [str(f['sha256']) for f in m.ListShared()]
            out['unshare'] = err(lambda: m.Unshare('\(hash)'))
            """)
        XCTAssertEqual(b["listed"] as? [String], [], "\(b)")
        XCTAssertTrue((b["unshare"] as? String)?.hasPrefix("org.example.Downloads.Error.NotFound") == true, "\(b)")

        // Served to the network, read as its owner.
        let body = directory.file("fetched.bin")
        let fetched = try await run(
            [
                "curl", "-sk", "--max-time", "10", "-o", body, "-w", "%{http_code}",
                "https://127.0.0.1:\(port)/shared.bin?sha256=\(hash)",
            ])
        XCTAssertEqual(fetched.stdout, "200", fetched.description)
        XCTAssertEqual(sha256(ofFile: body), hash)

        let again = try await python(
            as: users.a,
            """
            out['unshare'] = err(lambda: m.Unshare('\(hash)'))
            out['listed'] = [str(f['sha256']) for f in m.ListShared()]
            """)
        XCTAssertEqual(again["unshare"] as? String, "ok:None", "\(again)")
        XCTAssertEqual(again["listed"] as? [String], [], "\(again)")
    }
}
