import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Issue 45's probe, as it was run: `downloadsd --system` (root, the shipped policy), the caller
/// user nobody, hostile servers on 127.0.0.1; each test checks what the servers received, the
/// bytes published and the error names.
final class ProbeTests: SystemBusTestCase {
    /// Another origin (another port) for the files a Metalink document names.
    var other: TestHTTPServer!
    var downloads: String!

    override func setUp() async throws {
        try await super.setUp()
        other = try TestHTTPServer()
        chmod(directory.path, 0o755)
        downloads = directory.file("nobody")
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        chown(downloads, 65534, 65534)
    }

    override func tearDown() async throws {
        other?.stop()
        try await super.tearDown()
    }

    /// python3-dbus as nobody, with `SystemBusTestCase.python`'s helpers.
    func nobody(_ body: String) async throws -> [String: Any] {
        try await python(uid: 65534, gid: 65534, setprivGroups: "--clear-groups", body)
    }

    /// A Metalink v4 document of one file.
    static func meta4(
        urls: [String], size: Int? = nil, sha256: String? = nil, pieces: (length: Int, hashes: [String])? = nil
    ) -> [UInt8] {
        var file = "  <file name=\"f.bin\">\n"
        if let size { file += "    <size>\(size)</size>\n" }
        if let sha256 { file += "    <hash type=\"sha-256\">\(sha256)</hash>\n" }
        if let pieces {
            file += "    <pieces length=\"\(pieces.length)\" type=\"sha-256\">\n"
            file += pieces.hashes.map { "      <hash>\($0)</hash>\n" }.joined() + "    </pieces>\n"
        }
        file +=
            urls.map { "    <url>\($0.replacingOccurrences(of: "&", with: "&amp;"))</url>\n" }.joined() + "  </file>\n"
        return Array(
            "<?xml version=\"1.0\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n\(file)</metalink>\n".utf8)
    }

    func serveDocument(_ path: String, _ document: [UInt8]) {
        var route = Route(content: document)
        route.extraHeaders = [("Content-Type", "application/metalink4+xml")]
        http.set(path, route)
    }

    static func piece(hashes content: [UInt8], length: Int) -> [String] {
        stride(from: 0, to: content.count, by: length).map {
            sha256(Array(content[$0..<min(content.count, $0 + length)]))
        }
    }

    // 1. Credentials never reach another origin through a followed document: not on the first
    //    request, not after Pause and Resume, not after a restart of the daemon.
    func testCredentialsStayWithTheirOriginAfterAFollowedDocument() async throws {
        let content = Self.content(2_000_000, seed: 21)
        var file = Route(content: content)
        file.bytesPerSecond = 400_000
        other.set("/f", file)
        serveDocument("/doc/f.meta4", Self.meta4(urls: [other.url("/f")]))
        let docURL = http.url("/doc/f.meta4").replacingOccurrences(of: "http://", with: "http://alice:S3cret@")
        let first = try await nobody(
            """
            path = start('\(docURL)', '\(downloads!)/', headers=dbus.Dictionary({'Cookie': 'session=1'}, signature='ss'))
            wait_bytes(path, 300000)
            call(path, 'Pause')
            out['path'] = path
            out['state'] = str(prop(path, 'State'))
            """)
        let task = try ObjectPath(XCTUnwrap(first["path"] as? String))
        XCTAssertEqual(first["state"] as? String, "paused")
        killDaemon()
        try await startDaemon()
        let second = try await nobody(
            """
            call('\(task.rawValue)', 'Resume')
            out['state'] = wait('\(task.rawValue)', ['finished', 'failed'])
            """)
        XCTAssertEqual(second["state"] as? String, "finished")
        XCTAssertEqual(sha256(ofFile: downloads + "/f.bin"), Self.sha256(content))
        let document = http.requests(for: "/doc/f.meta4")
        XCTAssertEqual(document.count, 1, "the document was fetched once")
        XCTAssertNotNil(
            document.first?.userHeaders["authorization"], "the document's origin got the credentials it was given for")
        let requests = other.requests(for: "/f")
        XCTAssertTrue(requests.contains { $0.range != nil }, "the file was resumed with a range")
        for request in requests {
            XCTAssertNil(request.userHeaders["authorization"], "\(request)")
            XCTAssertNil(request.userHeaders["cookie"], "\(request)")
        }
        let url = try await property(task, "URL")
        XCTAssertEqual(url?.stringValue, other.url("/f"))
    }

    // 2. A retry after a followed document continues the document's file; the document is
    //    never published as the file.
    func testARetryAfterAFollowedDocumentFetchesTheFileNotTheDocument() async throws {
        let content = Self.content(500_000, seed: 22)
        var file = Route(content: content)
        file.failFirst = (count: 2, status: 503, retryAfter: "0")
        other.set("/f", file)
        serveDocument("/doc/f.meta4", Self.meta4(urls: [other.url("/f")]))
        let result = try await nobody(
            """
            path = start('\(http.url("/doc/f.meta4"))', '\(downloads!)/')
            out['state'] = wait(path, ['finished', 'failed'])
            out['destination'] = str(prop(path, 'Destination'))
            """)
        XCTAssertEqual(result["state"] as? String, "finished")
        XCTAssertEqual(result["destination"] as? String, downloads + "/f.bin")
        XCTAssertEqual(
            sha256(ofFile: downloads + "/f.bin"), Self.sha256(content), "the file, not the 200-byte document")
        XCTAssertEqual(http.requests(for: "/doc/f.meta4").count, 1, "the document was not fetched again by the retries")
        XCTAssertEqual(other.requests(for: "/f").count, 3)
    }

    // 3. A document's <size> and piece hashes are promises.
    func testADocumentsSizeAndPiecesAreHeldToTheServer() async throws {
        let promised = Self.content(4_194_304, seed: 23)
        let hashes = Self.piece(hashes: promised, length: 16384)
        XCTAssertEqual(hashes.count, 256)
        // A server sending 5,000,000 bytes.
        other.set("/long", Route(content: Self.content(5_000_000, seed: 24)))
        serveDocument(
            "/long.meta4", Self.meta4(urls: [other.url("/long")], size: promised.count, pieces: (16384, hashes)))
        // A server sending other bytes of the same length, without ranges (one stream).
        var sameLength = Route(content: Self.content(4_194_304, seed: 25))
        sameLength.ranges = false
        other.set("/same", sameLength)
        serveDocument(
            "/same.meta4", Self.meta4(urls: [other.url("/same")], size: promised.count, pieces: (16384, hashes)))
        // And the true file, one stream: published.
        var right = Route(content: promised)
        right.ranges = false
        other.set("/right", right)
        serveDocument(
            "/right.meta4", Self.meta4(urls: [other.url("/right")], size: promised.count, pieces: (16384, hashes)))
        let result = try await nobody(
            """
            for name in ['long', 'same', 'right']:
                path = start('\(http.url("/"))' + name + '.meta4', '\(downloads!)/' + name + '.bin')
                out[name] = [wait(path, ['finished', 'failed']), str(prop(path, 'Error')), str(prop(path, 'ErrorMessage'))]
            """)
        let long = result["long"] as? [String] ?? []
        XCTAssertEqual(long.first, "failed", "\(long)")
        XCTAssertEqual(long.dropFirst().first, "org.example.Downloads.Error.InvalidResponse", "\(long)")
        XCTAssertTrue(long.last?.contains("promises 4194304 bytes") == true, "\(long)")
        let same = result["same"] as? [String] ?? []
        XCTAssertEqual(same.first, "failed", "\(same)")
        XCTAssertEqual(same.dropFirst().first, "org.example.Downloads.Error.ChecksumMismatch", "\(same)")
        XCTAssertTrue(same.last?.contains("piece 0") == true, "\(same)")
        XCTAssertEqual((result["right"] as? [String])?.first, "finished")
        XCTAssertEqual(sha256(ofFile: downloads + "/right.bin"), Self.sha256(promised))
        XCTAssertFalse(FileManager.default.fileExists(atPath: downloads + "/long.bin"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: downloads + "/same.bin"))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: downloads).filter { $0.hasPrefix(".") }, [],
            "no partial file left")
    }

    // 4. One user's task does not starve every other user: a drip with 16 connections gives
    //    places back while root waits, and root's small file does not wait for the drip.
    func testAUsersSixteenConnectionDripDoesNotStarveAnotherUser() async throws {
        var drip = Route(content: Self.content(16 << 20, seed: 28))
        drip.bytesPerSecond = 2_000
        other.set("/drip", drip)
        let small = Self.content(100_000, seed: 29)
        http.set("/small", Route(content: small))
        let started = try await nobody(
            """
            path = start('\(other.url("/drip"))', '\(downloads!)/drip.bin', connections=dbus.UInt32(16))
            wait_bytes(path, 1)
            out['path'] = path
            """)
        let dripTask = try ObjectPath(XCTUnwrap(started["path"] as? String))
        try await until("the drip opens its connections") { other.requests(for: "/drip").count >= 8 }
        let root = try await start(http.url("/small"), directory.file("root-small.bin"))
        try await waitState(root, ["finished"], seconds: 20)
        XCTAssertEqual(sha256(ofFile: directory.file("root-small.bin")), Self.sha256(small))
        let state = try await property(dripTask, "State")?.stringValue
        XCTAssertEqual(state, "running", "the drip goes on beside it")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertTrue(log.contains("connection(s) given back to users who wait"), log)
        _ = try await nobody("m.Cancel('\(dripTask.rawValue)')")
    }

    // 6. A mirror that fails in any way is dropped; it never fails a task that has other
    //    sources, whatever the connection count.
    func testAMirrorRedirectingToAFileIsDroppedWithEightConnections() async throws {
        let content = Self.content(8 << 20, seed: 26)
        var file = Route(content: content)
        file.bytesPerSecond = 4_000_000
        other.set("/big", file)
        var evil = Route(content: [])
        evil.redirect = (status: 302, location: "file:///etc/passwd")
        http.set("/evil", evil)
        let result = try await nobody(
            """
            states = []
            for n in range(3):
                path = start('\(other.url("/big"))', '\(downloads!)/big%d.bin' % n,
                             mirrors=dbus.Array(['\(http.url("/evil"))'], signature='s'), connections=dbus.UInt32(8))
                states.append([wait(path, ['finished', 'failed'], 90), str(prop(path, 'ErrorMessage'))])
            out['states'] = states
            """)
        let states = result["states"] as? [[String]] ?? []
        XCTAssertEqual(states.map { $0.first ?? "" }, ["finished", "finished", "finished"], "\(states)")
        for n in 0..<3 { XCTAssertEqual(sha256(ofFile: downloads + "/big\(n).bin"), Self.sha256(content)) }
    }

    // 7. A followed document's URLs are checked as Start's URL is.
    func testAFollowedDocumentsURLsAreCheckedAsStartsAre() async throws {
        let content = Self.content(100_000, seed: 27)
        other.set("/f", Route(content: content))
        let withPassword = other.url("/f").replacingOccurrences(of: "http://", with: "http://mallory:Pw0wned@")
        serveDocument("/doc.meta4", Self.meta4(urls: [withPassword, other.url("/f")]))
        let long = other.url("/f?") + String(repeating: "a", count: 15_000)
        serveDocument("/long.meta4", Self.meta4(urls: [long]))
        let result = try await nobody(
            """
            path = start('\(http.url("/doc.meta4"))', '\(downloads!)/doc.bin')
            out['doc'] = [wait(path, ['finished', 'failed']), str(prop(path, 'URL'))]
            path = start('\(http.url("/long.meta4"))', '\(downloads!)/long.bin')
            out['long'] = [wait(path, ['finished', 'failed']), str(prop(path, 'Error')), str(prop(path, 'ErrorMessage'))]
            """)
        XCTAssertEqual(
            result["doc"] as? [String], ["finished", other.url("/f")], "the URL with a password was left out")
        XCTAssertEqual(sha256(ofFile: downloads + "/doc.bin"), Self.sha256(content))
        let long15 = result["long"] as? [String] ?? []
        XCTAssertEqual(long15.first, "failed", "\(long15)")
        XCTAssertEqual(long15.dropFirst().first, "org.example.Downloads.Error.InvalidResponse", "\(long15)")
        XCTAssertFalse(
            try String(contentsOfFile: daemonLog, encoding: .utf8).contains("Pw0wned"), "the password is in no log")
    }
}

/// Issue 45's fifth finding: with the README's hardened `--deny-network`, every other spelling
/// of the local host is denied too.
final class DenyNetworkProbeTests: SystemBusTestCase {
    override var extraArguments: [String] { ["--deny-network", "127.0.0.0/8", "--deny-network", "::1/128"] }

    func testEverySpellingOfThisHostIsDenied() async throws {
        http.set("/x", Route(content: Self.content(1000)))
        chmod(directory.path, 0o755)
        let target = directory.file("nobody")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        chown(target, 65534, 65534)
        let port = http.port
        let urls = ["0.0.0.0", "0", "[::]", "[0::0]", "[::ffff:0.0.0.0]", "127.0.0.1"].map { "http://\($0):\(port)/x" }
        let script = """
            import dbus, json, time
            bus = dbus.bus.BusConnection('\(bus.address)')
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            def prop(path, name):
                return str(bus.get_object('org.example.Downloads', path).Get(
                    'org.example.Downloads.Task', name, dbus_interface='org.freedesktop.DBus.Properties'))
            out = []
            for n, url in enumerate(\(urls)):
                path = m.Start(url, '\(target)/%d' % n, dbus.Dictionary({}, signature='sv'))
                deadline = time.time() + 30
                while time.time() < deadline and prop(path, 'State') not in ('finished', 'failed'): time.sleep(0.05)
                out.append([prop(path, 'State'), prop(path, 'Error')])
            print(json.dumps(out))
            """
        let output = try await run([
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
        ])
        XCTAssertEqual(output.status, 0, output.description)
        let rows = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data((output.stdout.split(separator: "\n").last ?? "").utf8))
                as? [[String]])
        XCTAssertEqual(rows.count, urls.count)
        for (url, row) in zip(urls, rows) {
            XCTAssertEqual(row, ["failed", "org.example.Downloads.Error.AccessDenied"], url)
        }
        XCTAssertEqual(http.requests(for: "/x").count, 0, "not one request reached the server")
    }
}
