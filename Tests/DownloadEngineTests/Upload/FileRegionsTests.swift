@testable import DownloadEngine
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Where an upload's file may go as `sendfile` regions: plain http only (a region through TLS
/// would stop the daemon), and only from a file the kernel can `sendfile` from.
final class FileRegionsTests: XCTestCase {
    func testOnlyPlainHTTPTakesRegions() {
        XCTAssertTrue(FileRegions.apply(to: "http://example.org/upload"))
        XCTAssertTrue(FileRegions.apply(to: "HTTP://example.org/upload"))
        XCTAssertFalse(FileRegions.apply(to: "https://example.org/upload"))
        XCTAssertFalse(FileRegions.apply(to: "HTTPS://example.org/upload"))
        XCTAssertFalse(FileRegions.apply(to: "httpx://example.org/"))
        XCTAssertFalse(FileRegions.apply(to: ""))
    }

    func testARegularFileCanBeSentAndItsOffsetIsLeftAlone() throws {
        let path = NSTemporaryDirectory() + "regions-\(getpid()).bin"
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let source = SourceFile(owning: fd)
        XCTAssertTrue(FileRegions.canSend(from: source))
        XCTAssertEqual(lseek(source.descriptor, 0, SEEK_CUR), 0, "the probe reads at an offset of its own")
        XCTAssertEqual(try source.read(4096, at: 0).readableBytes, 4096)
    }
}
