import FileIdentities
import Foundation
import LANShare
import TestSupport
import XCTest

/// `shared.json` as a restart reads it: what was saved comes back with its downloads counted; a
/// missing file is nothing shared; a corrupt one is refused whole (the daemon logs it and shares
/// nothing from before); an entry whose hash is not 64 hex digits is dropped.
final class SharedFileListTests: XCTestCase {
    func testSavedFilesComeBackAndAHostileListSharesNothing() throws {
        let work = try TemporaryDirectory(prefix: "shared-list")
        defer { work.remove() }
        let path = work.file("shared.json")
        XCTAssertEqual(try SharedFileList.load(from: path), [], "no list: nothing shared")

        var file = SharedFile(
            sha256: String(repeating: "ab", count: 32), name: "f.iso", path: "/home/u/f.iso", owner: 1000,
            app: "org.example.App", task: 7, identity: FileIdentity(device: 3, inode: 4), size: 10,
            modified: 123_456_789, expires: 2_000_000_000, shareLimit: 5)
        file.bytesServed = 25
        try SharedFileList.save([file], to: path)
        XCTAssertEqual(try SharedFileList.load(from: path), [file])
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)

        try Data("{not json".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try SharedFileList.load(from: path), "a corrupt list is refused whole")

        let forged = """
            [{"sha256": "../../etc/passwd", "name": "x", "path": "/etc/shadow", "owner": 0, "app": "", "task": 1,
              "device": 1, "inode": 1, "size": 1, "modified": 1, "expires": 9999999999, "shareLimit": 5,
              "bytesServed": 0}]
            """
        try Data(forged.utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(try SharedFileList.load(from: path), [], "an entry without a SHA-256 is dropped")
    }
}
