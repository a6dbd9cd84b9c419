import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Uploads on the system bus: the daemon (root) reads the file through the caller's file helper,
/// so a file only its user may read is sent for them and for nobody else, and the reply's file
/// is made as them.
extension MultiUserTests {
    /// A file of `size` bytes only user A may read (0600, in A's 0700 home): the home, the
    /// file's path and its bytes.
    func privateFile(_ name: String, size: Int, seed: UInt32) throws -> (home: String, path: String, content: [UInt8]) {
        let home = try makeDirectory("a", owner: users.a, mode: 0o700)
        let content = Self.content(size, seed: seed)
        let path = home + "/" + name
        try Data(content).write(to: URL(fileURLWithPath: path))
        chown(path, users.a.uid, users.a.gid)
        chmod(path, 0o600)
        return (home, path, content)
    }

    func testAFileOnlyItsUserMayReadIsUploadedForThemAndNobodyElse() async throws {
        let (home, secret, content) = try privateFile("diary.txt", size: 600_000, seed: 94)
        http.set("/backup", Route.receiving(status: 201, reply: "kept\n"))
        let mine = try await python(
            as: users.a, umask: 0o027,
            """
            path = str(m.Upload('\(http.url("/backup"))', '\(secret)', dbus.Dictionary({'reply_destination': '\(home)/reply.txt'}, signature='sv')))
            out['state'] = wait(path, ['finished', 'failed'])
            out['kind'] = str(prop(path, 'Kind'))
            """)
        XCTAssertEqual(mine["state"] as? String, "finished", daemonLogText)
        XCTAssertEqual(mine["kind"] as? String, "upload")
        XCTAssertEqual(http.received("/backup").map { Self.sha256($0.body) }, [Self.sha256(content)])
        XCTAssertEqual(try String(contentsOfFile: home + "/reply.txt", encoding: .utf8), "kept\n")
        XCTAssertEqual(owner(of: home + "/reply.txt")?.uid, users.a.uid, "the reply's file is the caller's")
        XCTAssertEqual(owner(of: home + "/reply.txt")?.mode, 0o640, "0666 less the caller's umask")

        let theirs = try await python(
            as: users.b,
            """
            out['upload'] = err(lambda: m.Upload('\(http.url("/backup"))', '\(secret)', dbus.Dictionary({}, signature='sv')))
            """)
        let refused = try XCTUnwrap(theirs["upload"] as? String)
        XCTAssertTrue(refused.hasPrefix("org.example.Downloads.Error.FileError"), refused)
        XCTAssertEqual(http.received("/backup").count, 1, "B's call sent nothing")
    }

    /// A file larger than one whole body goes as `sendfile` regions from the descriptor the
    /// user's file helper opened: the bytes are the file's.
    func testALargeFileOfTheUserGoesFromTheHelpersDescriptorByteForByte() async throws {
        let (_, secret, content) = try privateFile("photos.tar", size: 3_000_000, seed: 95)
        http.set("/large", Route.receiving(status: 201))
        let mine = try await python(
            as: users.a,
            """
            path = str(m.Upload('\(http.url("/large"))', '\(secret)', dbus.Dictionary({}, signature='sv')))
            out['state'] = wait(path, ['finished', 'failed'])
            """)
        XCTAssertEqual(mine["state"] as? String, "finished", daemonLogText)
        XCTAssertEqual(http.received("/large").map { Self.sha256($0.body) }, [Self.sha256(content)])
    }
}
