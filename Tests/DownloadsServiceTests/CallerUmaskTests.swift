@testable import DownloadsService
import Foundation
import XCTest

/// The caller's umask, read from /proc/PID/status for every Start.
final class CallerUmaskTests: XCTestCase {
    func testReadsThisProcesssUmask() {
        let previous = umask(0o027)
        defer { umask(previous) }
        XCTAssertEqual(CallerUmask.umask(pid: UInt32(getpid())), 0o027)
        XCTAssertEqual(CallerUmask.fileMode(pid: UInt32(getpid())), 0o640)
        XCTAssertNil(CallerUmask.umask(pid: UInt32(Int32.max)), "no such process")
        XCTAssertEqual(CallerUmask.fileMode(pid: nil), 0o644)
    }

    func testParsesOnlyAUmaskLine() {
        func parse(_ text: String) -> UInt32? {
            Array(text.utf8).withUnsafeBufferPointer { CallerUmask.parse($0) }
        }
        XCTAssertEqual(parse("Name:\tx\nUmask:\t0022\nState:\tR\n"), 0o022)
        XCTAssertEqual(parse("Umask:\t0777"), 0o777)
        XCTAssertNil(parse("Name:\tUmask: 0022\n"), "not at the start of a line")
        XCTAssertNil(parse("Umask:\t\n"))
        XCTAssertNil(parse(""))
    }
}
