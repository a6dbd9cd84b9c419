import Crypto
@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import TestHTTPServer
import XCTest

/// The `checksum` option: `ALGO:HEX` parsed strictly, the digest computed while the file is
/// written (read back only for what was not written in order), and every algorithm checked end
/// to end through the engine against bytes on disk.
final class ChecksumTests: EngineTestCase {
    static func hex<D: Digest>(_ digest: D) -> String { digest.map { String(format: "%02x", $0) }.joined() }

    static func digest(_ algorithm: Checksum.Algorithm, _ bytes: [UInt8]) -> String {
        switch algorithm {
        case .sha256: return hex(SHA256.hash(data: bytes))
        case .sha384: return hex(SHA384.hash(data: bytes))
        case .sha512: return hex(SHA512.hash(data: bytes))
        case .sha1: return hex(Insecure.SHA1.hash(data: bytes))
        case .md5: return hex(Insecure.MD5.hash(data: bytes))
        }
    }

    func testChecksumTextIsParsedStrictly() throws {
        let md5 = try Checksum.parse("MD5:D41D8CD98F00B204E9800998ECF8427E")
        XCTAssertEqual(md5.algorithm, .md5)
        XCTAssertEqual(md5.text, "md5:d41d8cd98f00b204e9800998ecf8427e", "the algorithm and the digits in lower case")
        for algorithm in Checksum.Algorithm.allCases {
            let text = "\(algorithm.rawValue):" + String(repeating: "ab", count: algorithm.hexLength / 2)
            XCTAssertEqual(try Checksum.parse(text).text, text)
        }
        func refused(_ text: String, _ words: String) {
            XCTAssertThrowsError(try Checksum.parse(text), text) { error in
                XCTAssertTrue((error as? Checksum.Invalid)?.message.contains(words) == true, "\(error)")
            }
        }
        refused("crc32:12345678", "unknown checksum algorithm 'crc32'")
        refused("d41d8cd98f00b204e9800998ecf8427e", "ALGO:HEX")
        refused("sha1:abc", "even number")
        refused("sha1:abcd", "is 40 hexadecimal digits, got 4")
        refused("sha256:" + String(repeating: "g", count: 64), "hexadecimal digits")
        refused("sha256:", "is 64 hexadecimal digits, got 0")
        // The IANA names Metalink and the Digest headers use, one table for both.
        XCTAssertEqual(
            ["SHA-256", "sha-512", "SHA", "sha-1", "MD5", "sha-384"].compactMap(Checksum.Algorithm.init(ianaName:)),
            [.sha256, .sha512, .sha1, .sha1, .md5, .sha384])
        XCTAssertNil(Checksum.Algorithm(ianaName: "UNIXsum"))
    }

    /// Bytes written in order are hashed as they go; a segmented download's later ranges, a
    /// rewrite and a truncation are read back at the end; the digest is right every time.
    func testTheRunningDigestReadsBackOnlyWhatWasNotWrittenInOrder() throws {
        let content = Self.content(300_000, seed: 3)
        func finish(_ digest: inout RunningDigest, _ file: [UInt8]) throws -> String {
            try digest.finish(length: Int64(file.count)) { offset, buffer in
                let available = file.count - Int(offset)
                let n = min(buffer.count, available)
                buffer.copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: file.withUnsafeBytes { $0 }[Int(offset)..<Int(offset) + n]))
                return n
            }
        }
        func write(_ digest: inout RunningDigest, _ range: Range<Int>) {
            content[range].withUnsafeBytes { digest.wrote($0, at: Int64(range.lowerBound)) }
        }
        for algorithm in Checksum.Algorithm.allCases {
            let expected = Self.digest(algorithm, content)
            // One stream, in order: nothing read back.
            var inOrder = RunningDigest(algorithm)
            for start in stride(from: 0, to: content.count, by: 16_384) {
                write(&inOrder, start..<min(content.count, start + 16_384))
            }
            XCTAssertEqual(try finish(&inOrder, content), expected)
            XCTAssertEqual(inOrder.readBack, 0, algorithm.rawValue)
            // Four ranges written side by side: the first is hashed in flight, the rest read back.
            var segmented = RunningDigest(algorithm)
            for step in stride(from: 0, to: 75_000, by: 15_000) {
                for quarter in 0..<4 { write(&segmented, quarter * 75_000 + step..<quarter * 75_000 + step + 15_000) }
            }
            XCTAssertEqual(try finish(&segmented, content), expected)
            XCTAssertEqual(segmented.readBack, 225_000, algorithm.rawValue)
            // Truncated and written again: what was hashed beyond the cut is forgotten.
            var truncated = RunningDigest(algorithm)
            write(&truncated, 0..<200_000)
            truncated.truncated(to: 0)
            write(&truncated, 0..<content.count)
            XCTAssertEqual(try finish(&truncated, content), expected)
            XCTAssertEqual(truncated.readBack, 0)
            // A rewrite of bytes already hashed starts over from the file.
            var rewritten = RunningDigest(algorithm)
            write(&rewritten, 0..<100_000)
            write(&rewritten, 50_000..<content.count)
            XCTAssertEqual(try finish(&rewritten, content), expected)
        }
    }

    func testEveryAlgorithmIsCheckedBeforeTheRename() async throws {
        let content = Self.content(700_000, seed: 5)
        server.set("/sum", Route(content: content))
        var good: [(UInt64, Checksum.Algorithm)] = [], bad: [(UInt64, Checksum.Algorithm)] = []
        for algorithm in Checksum.Algorithm.allCases {
            let right = try Checksum(algorithm, hex: Self.digest(algorithm, content))
            good.append((try start("/sum") { $0.checksum = right }, algorithm))
            let wrong = try Checksum(algorithm, hex: String(repeating: "0", count: algorithm.hexLength))
            bad.append((try start("/sum") { $0.checksum = wrong }, algorithm))
        }
        for (id, algorithm) in good {
            let done = try await wait(id, for: [.finished, .failed])
            XCTAssertEqual(done.state, .finished, "\(algorithm): \(done.record.errorMessage ?? "")")
            XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        }
        for (id, algorithm) in bad {
            let done = try await wait(id, for: [.finished, .failed])
            XCTAssertEqual(done.state, .failed)
            XCTAssertEqual(done.record.errorName, "ChecksumMismatch")
            let message = done.record.errorMessage ?? ""
            XCTAssertTrue(
                message.hasPrefix("\(algorithm.displayName) of the download is \(Self.digest(algorithm, content))"),
                message)
            XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("out\(id)")), "nothing is kept")
        }
        XCTAssertEqual(leftovers(), [])
    }

    /// Ranges written out of order and a download resumed after a pause still check right: what
    /// was not hashed in flight is read back through the descriptor.
    func testSegmentedAndResumedDownloadsAreCheckedWhole() async throws {
        let content = Self.content(4 << 20, seed: 6)
        var route = Route(content: content)
        route.bytesPerSecond = 4_000_000
        server.set("/seg", route)
        server.set("/slow", route)
        let segmented = try start("/seg") { options in
            options.connections = 4
            options.checksum = try? Checksum(.sha512, hex: Self.digest(.sha512, content))
        }
        let paused = try start("/slow") { $0.checksum = try? Checksum(.sha384, hex: Self.digest(.sha384, content)) }
        try await waitForBytes(paused, atLeast: 1_000_000)
        _ = try await manager.pause(paused)
        server.update("/slow") { $0.bytesPerSecond = nil }
        try manager.resume(paused)
        for id in [segmented, paused] {
            let done = try await wait(id, for: [.finished, .failed], seconds: 60)
            XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
            XCTAssertEqual(sha256(ofFile: directory.file("out\(id)")), Self.sha256(content))
        }
        XCTAssertGreaterThan(server.requests(for: "/seg").count, 1, "it was segmented")
    }

    /// Resume data made before `checksum` existed carries `sha256` (hex) in its options: it still
    /// reads, as the checksum `sha256:HEX`, and the task made from it checks it.
    func testOlderResumeDataWithSha256StillReads() async throws {
        let content = Self.content(60_000, seed: 9)
        server.set("/old", Route(content: content))
        var record = DownloadTaskRecord(
            id: 77, owner: Self.owner, session: "s", url: server.url("/old"), destination: directory.file("old"),
            destinationIsDirectory: false, options: DownloadOptions()
        )
        record.options.checksum = try Checksum(.sha256, hex: Self.sha256(content))
        let current = try ResumeData(record: record).encoded(key: key)
        // The same blob as a daemon before v1.2 wrote it, authenticated with the same key.
        var lines = current.split(separator: 10).map { Array($0) }
        let json = String(decoding: lines[1], as: UTF8.self)
        XCTAssertTrue(json.contains(#""checksum":"sha256:\#(Self.sha256(content))""#), json)
        lines[1] = Array(json.replacingOccurrences(of: #""checksum":"sha256:"#, with: #""sha256":""#).utf8)
        lines[0] = Array("org.example.Downloads.ResumeData/2".utf8)
        let text = lines[0] + [10] + lines[1]
        let mac = HMAC<SHA256>.authenticationCode(for: text, using: key).map { String(format: "%02x", $0) }.joined()
        let old = text + Array("\nhmac-sha256:\(mac)\n".utf8)
        let data = try manager.decodeResumeData(old, owner: Self.owner)
        XCTAssertEqual(data.options.checksum, record.options.checksum)
        let snapshot = try await manager.adopt(data, change: DownloadOptions.Change())
        let done = try await wait(snapshot.id, for: [.finished, .failed])
        XCTAssertEqual(done.state, .finished, done.record.errorMessage ?? "")
        XCTAssertEqual(sha256(ofFile: directory.file("old")), Self.sha256(content))
    }
}
