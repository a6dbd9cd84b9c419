@testable import DownloadModel
import Foundation
import XCTest

/// `metadata` is at most 4096 bytes as stored (its JSON). The JSON is made only when a bound
/// says it might be longer: the bound must never be below the real size, and metadata near the
/// limit is still judged by its real size.
final class MetadataLimitTests: XCTestCase {
    func testTheBoundIsNeverBelowTheStoredSize() throws {
        let values: [MetadataValue] = [
            .string(""), .string("plain"), .string("\"quoted\" \\ and /slashes/"), .string("\u{1}\u{1f}\u{7f}"),
            .string("zwölf ünïcödé 😀"), .objectPath("/org/example/Downloads/tasks/1"), .signature("a{sv}"),
            .byte(255), .boolean(false), .int16(.min), .uint16(.max), .int32(.min), .uint32(.max),
            .int64(.min), .uint64(.max), .double(-1.2345678901234567e-308), .double(.greatestFiniteMagnitude),
        ]
        for value in values {
            let stored = try JSONEncoder().encode(value).count
            XCTAssertGreaterThanOrEqual(value.storedBytesBound, stored, "\(value)")
        }
    }

    func testMetadataNearTheLimitIsJudgedByItsStoredSize() throws {
        var options = DownloadOptions()
        // Bound far above 4096 (every byte could be escaped), stored size below it: accepted.
        options.metadata = ["note": .string(String(repeating: "x", count: 4000))]
        XCTAssertNoThrow(try options.validate())
        // Stored size above it: refused with the size.
        options.metadata = ["note": .string(String(repeating: "x", count: 4090))]
        XCTAssertThrowsError(try options.validate()) { error in
            XCTAssertTrue("\(error)".contains("at most 4096"), "\(error)")
        }
        // Escaped bytes count as stored: 1000 control characters are 6000 bytes of JSON.
        options.metadata = ["note": .string(String(repeating: "\u{1}", count: 1000))]
        XCTAssertThrowsError(try options.validate())
        // Small metadata: no JSON made, accepted.
        options.metadata = ["apt_url": .string("http://deb.example/pool/a.deb"), "apt_started": .int64(1)]
        XCTAssertNoThrow(try options.validate())
    }
}
