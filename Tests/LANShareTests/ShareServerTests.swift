import Crypto
import FileIdentities
import Foundation
import LANShare
import TestSupport
import XCTest

/// The share server against real clients: curl as Passim's own client uses it
/// (`curl -k https://HOST:PORT/NAME?sha256=H`), curl's HTTP/1.0, ranges and HEAD, and what an
/// adversary does: a hash not held, a path that climbs, a storm from one address, a file changed
/// or swapped for a link after it was shared.
final class ShareServerTests: XCTestCase {
    var work: TemporaryDirectory!
    var index: ShareIndex!
    var server: ShareServer!

    override func setUp() async throws {
        work = try TemporaryDirectory(prefix: "share-test")
        index = ShareIndex()
    }

    override func tearDown() async throws {
        server?.stop()
        work?.remove()
    }

    func start(budget: AddressBudget = AddressBudget(), preferredPort: Int = 0, host: String = "127.0.0.1") throws {
        server = try ShareServer(
            index: index, key: try ShareKey.loadOrCreate(in: work.path), budget: budget, host: host,
            preferredPort: preferredPort
        ) { file in
            let descriptor = open(file.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw CocoaError(.fileNoSuchFile) }
            return descriptor
        }
    }

    /// Shares the file at `path` as it is now.
    @discardableResult
    func share(_ path: String, limit: UInt32 = 5, owner: UInt32 = 1000) throws -> String {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let sha256 = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        index.add(
            SharedFile(
                sha256: sha256, name: (path as NSString).lastPathComponent, path: path, owner: owner, app: "",
                task: 1, identity: FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)),
                size: Int64(info.st_size),
                modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                expires: Int64(Date().timeIntervalSince1970) + 3600, shareLimit: limit))
        return sha256
    }

    /// curl's status code, and where it wrote the body.
    func curl(
        _ target: String, _ extra: [String] = [], host: String = "127.0.0.1"
    ) async throws -> (
        status: Int, body: String
    ) {
        let body = work.file("body-\(UUID().uuidString)")
        let out = try await ProcessRunner.run(
            ["curl", "-sSk", "--max-time", "20", "-o", body, "-w", "%{http_code}"] + extra
                + ["https://\(host):\(server.port)\(target)"])
        return (Int(out.stdout) ?? -1, body)
    }

    /// Asserts the status curl got for `target`.
    func expect(
        _ status: Int, _ target: String, _ extra: [String] = [], host: String = "127.0.0.1", message: String = "",
        line: UInt = #line
    ) async throws {
        let got = try await curl(target, extra, host: host).status
        XCTAssertEqual(got, status, message, line: line)
    }

    func testAPassimClientGetsTheFileAndPassimsAnswersToTheRest() async throws {
        try start()
        let content = TestData.content(3_000_000, seed: 7)
        let path = work.file("firmware.cab")
        FileManager.default.createFile(atPath: path, contents: Data(content))
        let hash = try share(path)

        let whole = try await curl("/firmware.cab?sha256=\(hash)")
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(TestData.sha256(ofFile: whole.body), TestData.sha256(content))
        // HTTP/1.0, as an old client asks: the whole file, then the connection closed.
        let old = try await curl("/firmware.cab?sha256=\(hash)", ["--http1.0"])
        XCTAssertEqual(old.status, 200)
        XCTAssertEqual(TestData.sha256(ofFile: old.body), TestData.sha256(content))
        let range = try await curl("/firmware.cab?sha256=\(hash)", ["-r", "1000-1999"])
        XCTAssertEqual(range.status, 206)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: range.body)), Data(content[1000..<2000]))
        try await expect(416, "/firmware.cab?sha256=\(hash)", ["-r", "3000000-"])
        let head = try await ProcessRunner.run(
            ["curl", "-sSkI", "https://127.0.0.1:\(server.port)/firmware.cab?sha256=\(hash)"])
        XCTAssertTrue(head.stdout.lowercased().contains("content-length: 3000000"), head.stdout)
        XCTAssertTrue(
            head.stdout.lowercased().contains("content-disposition: attachment; filename=\"firmware.cab\""), head.stdout
        )

        try await expect(400, "/firmware.cab", message: "no hash")
        try await expect(406, "/firmware.cab?sha256=1234", message: "a malformed hash")
        let other = String(repeating: "0", count: 64)
        try await expect(403, "/firmware.cab?sha256=\(other)", message: "a hash not held here")
        try await expect(403, "/", message: "no index")
        // A path that climbs reaches nothing: the hash alone finds a file.
        let climbing = try await curl("/..%2F..%2Fetc%2Fpasswd?sha256=\(hash)", ["--path-as-is"])
        XCTAssertEqual(climbing.status, 200)
        XCTAssertEqual(TestData.sha256(ofFile: climbing.body), TestData.sha256(content))
        try await expect(403, "/../../etc/passwd?sha256=\(other)", ["--path-as-is"])
    }

    func testAFileChangedOrSwappedForALinkIsWithdrawnAndNeverServed() async throws {
        try start()
        let path = work.file("a.bin")
        FileManager.default.createFile(atPath: path, contents: Data(TestData.content(10_000, seed: 1)))
        let changed = try share(path)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("more".utf8))
        try handle.close()
        try await expect(403, "/a.bin?sha256=\(changed)")
        XCTAssertTrue(index.list(owner: nil).isEmpty, "withdrawn once found changed")

        let second = work.file("b.bin")
        let secret = work.file("secret")
        FileManager.default.createFile(atPath: second, contents: Data(TestData.content(10_000, seed: 2)))
        FileManager.default.createFile(atPath: secret, contents: Data(TestData.content(10_000, seed: 3)))
        let swapped = try share(second)
        try FileManager.default.removeItem(atPath: second)
        try FileManager.default.createSymbolicLink(atPath: second, withDestinationPath: secret)
        let answer = try await curl("/b.bin?sha256=\(swapped)")
        XCTAssertEqual(answer.status, 403)
        XCTAssertNotEqual(TestData.sha256(ofFile: answer.body), TestData.sha256(ofFile: secret))
        XCTAssertTrue(index.list(owner: nil).isEmpty)
    }

    func testTheLimitIsCountedInBytesServed() async throws {
        try start()
        let path = work.file("half.bin")
        FileManager.default.createFile(atPath: path, contents: Data(TestData.content(1000, seed: 4)))
        let hash = try share(path, limit: 1)
        // One client taking the file in two ranges is one download.
        try await expect(206, "/half.bin?sha256=\(hash)", ["-r", "0-499"])
        XCTAssertEqual(index.list(owner: nil).first?.shares, 0)
        try await expect(206, "/half.bin?sha256=\(hash)", ["-r", "500-999"])
        XCTAssertTrue(index.list(owner: nil).isEmpty, "withdrawn at its limit")
        try await expect(403, "/half.bin?sha256=\(hash)")
    }

    func testAStormFromOneAddressIsRefused() async throws {
        try start(budget: AddressBudget(burst: 5, perSecond: 0.01))
        let path = work.file("s.bin")
        FileManager.default.createFile(atPath: path, contents: Data("storm".utf8))
        let hash = try share(path, limit: 100)
        var statuses: [Int] = []
        for _ in 0..<8 { statuses.append(try await curl("/s.bin?sha256=\(hash)").status) }
        XCTAssertEqual(statuses, [200, 200, 200, 200, 200, 403, 403, 403])
    }

    func testTheKeyIsKeptAndAPortInUseIsLeftForAnother() async throws {
        let first = try ShareKey.loadOrCreate(in: work.path)
        let again = try ShareKey.loadOrCreate(in: work.path)
        XCTAssertEqual(first.fingerprint, again.fingerprint, "made once, then read")
        for name in ["share-key.pem", "share-certificate.pem"] {
            let mode = try FileManager.default.attributesOfItem(atPath: work.file(name))[.posixPermissions] as? Int
            XCTAssertEqual(mode, 0o600, name)
        }
        // The preferred port taken by another listener: the server takes another one.
        try start()
        let taken = server.port
        let occupant = server
        server = nil
        try start(preferredPort: taken)
        XCTAssertNotEqual(server.port, taken)
        occupant?.stop()
        // On every address by default ("::"), reached over IPv4 and IPv6 loopback.
        server.stop()
        try start(host: "::")
        let path = work.file("d.bin")
        FileManager.default.createFile(atPath: path, contents: Data("dual".utf8))
        let hash = try share(path)
        try await expect(200, "/d.bin?sha256=\(hash)")
        try await expect(200, "/d.bin?sha256=\(hash)", host: "[::1]")
    }
}
