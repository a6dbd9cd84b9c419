import FileIdentities
import LANShare
import NIOConcurrencyHelpers
import XCTest

/// The index of shared files: expiry, the limit counted in bytes served, an owner's own.
final class ShareIndexTests: XCTestCase {
    static func file(
        _ sha256: String, owner: UInt32 = 1000, size: Int64 = 100, expires: Int64 = 1_000, limit: UInt32 = 2
    )
        -> SharedFile
    {
        SharedFile(
            sha256: sha256, name: "f.bin", path: "/tmp/f.bin", owner: owner, app: "", task: 1,
            identity: FileIdentity(device: 1, inode: 2), size: size, modified: 0, expires: expires, shareLimit: limit)
    }

    func testExpiryAndTheLimitInBytesServedWithdrawTheFile() {
        let gone = NIOLockedValueBox([String]())
        let index = ShareIndex { file, why in gone.withLockedValue { $0.append("\(file.sha256) \(why.rawValue)") } }
        index.add(Self.file("a"))
        index.add(Self.file("b", expires: 500))
        XCTAssertNotNil(index.offered("a", at: 10))
        XCTAssertNil(index.offered("b", at: 500), "expired at its time")
        XCTAssertEqual(gone.withLockedValue { $0 }, ["b expired"])
        // Four ranges of 50 bytes are two downloads of a 100-byte file: the limit of 2.
        for _ in 0..<3 { index.served("a", bytes: 50) }
        XCTAssertEqual(index.list(owner: nil).first?.shares, 1)
        XCTAssertNotNil(index.offered("a", at: 10))
        index.served("a", bytes: 50)
        XCTAssertNil(index.offered("a", at: 10))
        XCTAssertEqual(gone.withLockedValue { $0 }, ["b expired", "a limit reached"])
        XCTAssertTrue(index.isEmpty)
    }

    func testAnOwnerListsAndWithdrawsItsOwnOnly() {
        let index = ShareIndex()
        index.add(Self.file("a", owner: 1000))
        index.add(Self.file("b", owner: 1001))
        XCTAssertEqual(index.list(owner: 1000).map(\.sha256), ["a"])
        XCTAssertFalse(index.remove("b", owner: 1000), "another user's file")
        XCTAssertEqual(index.list(owner: nil).map(\.sha256), ["a", "b"])
        XCTAssertTrue(index.remove("b", owner: 1001))
        XCTAssertTrue(index.remove("a", owner: 0), "root withdraws anyone's")
        XCTAssertTrue(index.isEmpty)
    }

    func testExpireSweepsWhatIsDue() {
        let index = ShareIndex()
        index.add(Self.file("a", expires: 100))
        index.add(Self.file("b", expires: 200))
        index.expire(at: 150)
        XCTAssertEqual(index.list(owner: nil).map(\.sha256), ["b"])
    }
}
