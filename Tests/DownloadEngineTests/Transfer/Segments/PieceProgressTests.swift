@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import TestSupport
import XCTest

/// Piece hashes: their form, the bookkeeping of which pieces are complete and verified, and a
/// segmented table that checks each piece on a real file and sends a corrupt one back to be fetched.
final class PieceProgressTests: XCTestCase {
    let piece: Int64 = 16 << 10

    func hashes(of content: [UInt8]) throws -> PieceHashes {
        let hexes = stride(from: 0, to: content.count, by: Int(piece)).map { start in
            TestData.sha256(Array(content[start..<min(content.count, start + Int(piece))]))
        }
        return try PieceHashes(.sha256, length: piece, hashes: hexes)
    }

    func testPieceHashesTakeTheirDigestsAndTellWhichLengthsTheyFit() throws {
        let sha1 = try PieceHashes(
            .sha1, length: piece,
            hashes: ["A9993E364706816ABA3E25717850C26C9CD0D89D", "da39a3ee5e6b4b0d3255bfef95601890afd80709"])
        XCTAssertEqual(sha1.count, 2)
        XCTAssertEqual(sha1.hex(of: 0), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(
            try PieceHashes(.sha1, length: piece, concatenated: sha1.hexDigests), sha1, "the stored form reads back")
        XCTAssertTrue(sha1.fits(piece + 1))
        XCTAssertTrue(sha1.fits(2 * piece))
        XCTAssertFalse(sha1.fits(piece), "one piece short")
        XCTAssertFalse(sha1.fits(2 * piece + 1), "a third piece")
        for (length, hashes, reason) in [
            (piece, ["abcd"], "40 hexadecimal digits"),
            (Int64(100), [sha1.hex(of: 0)], "piece length"),
            (piece, [String](), "1 to"),
            (piece, ["zz" + String(repeating: "0", count: 38)], "hexadecimal"),
        ] {
            XCTAssertThrowsError(try PieceHashes(.sha1, length: length, hashes: hashes)) { error in
                XCTAssertTrue(
                    (error as? Checksum.Invalid)?.message.contains(reason) == true, "\(error) should say \(reason)")
            }
        }
    }

    func testPiecesCompleteOnTheirLastByteAndOnlyVerifiedOnesAreRecordedAsHeld() throws {
        let content = TestData.content(Int(piece) * 3 + 100, seed: 7)
        let length = Int64(content.count)
        var progress = PieceProgress(
            try hashes(of: content), fileLength: length, remaining: [ByteRange(start: 0, end: length)])
        XCTAssertEqual(progress.count, 4)
        XCTAssertEqual(progress.verifiedCount, 0)
        // Two sources write the first piece; the second piece is written whole by one.
        XCTAssertEqual(progress.wrote(at: 0, count: 1000, source: 0), [])
        XCTAssertEqual(progress.wrote(at: 1000, count: 2 * piece - 1000, source: 2), [0, 1])
        // Nothing is verified yet: a checkpoint records the ranges still to fetch and these pieces.
        XCTAssertEqual(
            progress.recorded([ByteRange(start: 2 * piece, end: length)]), [ByteRange(start: 0, end: length)])
        progress.passed(0)
        XCTAssertEqual(
            progress.recorded([ByteRange(start: 2 * piece, end: length)]), [ByteRange(start: piece, end: length)])
        let failed = progress.failed(1)
        XCTAssertEqual(failed.sources, [2], "the one source that wrote it")
        XCTAssertEqual(failed.failures, 1)
        XCTAssertEqual(progress.failed(1).failures, 2, "counted per piece")
        // Written again: complete again, from another source.
        XCTAssertEqual(progress.wrote(at: piece, count: piece, source: 1), [1])
        XCTAssertEqual(progress.failed(1).sources, [1])
        // The short last piece; bytes written twice are not counted twice.
        XCTAssertEqual(progress.wrote(at: 3 * piece, count: 50, source: 0), [])
        XCTAssertEqual(progress.wrote(at: 3 * piece, count: 100, source: 0), [3])
        XCTAssertEqual(progress.range(of: 3), ByteRange(start: 3 * piece, end: length))

        // A restart from recorded ranges: pieces outside them were verified before.
        let resumed = PieceProgress(
            try hashes(of: content), fileLength: length, remaining: [ByteRange(start: piece, end: 2 * piece)])
        XCTAssertEqual(resumed.verifiedCount, 3)
        XCTAssertEqual(resumed.recorded([]), [ByteRange(start: piece, end: 2 * piece)])
        XCTAssertEqual(
            PieceProgress.pieces(overlapping: ByteRange(start: piece - 1, end: piece + 1), length: piece, count: 4),
            0..<2)
        XCTAssertEqual(
            ByteRange.union([ByteRange(start: 5, end: 9), ByteRange(start: 0, end: 3), ByteRange(start: 3, end: 6)]),
            [ByteRange(start: 0, end: 9)])
    }

    func testATableChecksEachPieceOnTheFileAndFetchesACorruptOneAgain() async throws {
        let directory = try TemporaryDirectory()
        let content = TestData.content(Int(piece) * 4, seed: 8)
        let length = Int64(content.count)
        let failures = NIOLockedValueBox<[SegmentTable.PieceFailure]>([])
        let table = SegmentTable(
            length: length, remaining: [ByteRange(start: 0, end: length)], pieces: 2, minimumSplit: 1000,
            hashes: try hashes(of: content),
            onPieceFailed: { failure in failures.withLockedValue { $0.append(failure) } }
        )
        let writer = PartialFileWriter(
            path: directory.file("f.part"), fileAccess: DirectFileAccess(), queue: .init(label: "pieces"))
        let loop = EmbeddedEventLoop()
        let first = try XCTUnwrap(table.claim())
        let second = try XCTUnwrap(table.claim())
        XCTAssertEqual(
            [first.start, first.end, second.start, second.end], [0, 2 * piece, 2 * piece, length],
            "cut on a piece boundary")
        var corrupt = content
        corrupt[Int(piece) * 3 + 5] ^= 0xff
        _ = table.write(
            first.id, source: 0, ByteBuffer(bytes: content[0..<Int(2 * piece)]), writer: writer, eventLoop: loop)
        _ = table.write(
            second.id, source: 3, ByteBuffer(bytes: corrupt[Int(2 * piece)...]), writer: writer, eventLoop: loop)
        await table.settle()
        XCTAssertEqual(failures.withLockedValue { $0 }.map(\.piece), [3])
        XCTAssertEqual(failures.withLockedValue { $0 }.first?.sources, [3])
        XCTAssertEqual(table.verifiedPieces?.verified, 3)
        XCTAssertEqual(
            table.remaining, [ByteRange(start: 3 * piece, end: length)], "only the corrupt piece is to fetch again")
        XCTAssertEqual(table.held, 3 * piece)
        XCTAssertEqual(table.withRemaining { $0 }, [ByteRange(start: 3 * piece, end: length)])
        // A refused source's bytes are dropped; another source's right bytes complete the file.
        table.refuse([3])
        let again = try XCTUnwrap(table.claim())
        XCTAssertEqual([again.start, again.end], [3 * piece, length])
        XCTAssertEqual(
            table.write(
                again.id, source: 3, ByteBuffer(bytes: content[Int(3 * piece)...]), writer: writer, eventLoop: loop
            ).accepted, 0)
        _ = table.write(
            again.id, source: 1, ByteBuffer(bytes: content[Int(3 * piece)...]), writer: writer, eventLoop: loop)
        await table.settle()
        XCTAssertTrue(table.isComplete)
        XCTAssertEqual(table.verifiedPieces?.verified, 4)
        XCTAssertEqual(table.withRemaining { $0 }, [])
        let bytes = try await writer.perform { writer in
            try writer.digest(of: ByteRange(start: 0, end: length), .sha256)
        }
        XCTAssertEqual(bytes, TestData.sha256(content))
        try await loop.shutdownGracefully()
    }

    func testASourceNotYetProvenClaimsOnePieceAndTheRestWaits() throws {
        let content = TestData.content(Int(piece) * 8, seed: 9)
        let length = Int64(content.count)
        let table = SegmentTable(
            length: length, remaining: [ByteRange(start: 0, end: length)], pieces: 2, minimumSplit: 1000,
            hashes: try hashes(of: content)
        )
        XCTAssertEqual(table.pieceLength, piece)
        let probe = try XCTUnwrap(table.claim(onePiece: true))
        XCTAssertEqual([probe.start, probe.end], [0, piece], "one piece of the first range")
        let next = try XCTUnwrap(table.claim())
        XCTAssertEqual([next.start, next.end], [piece, 4 * piece], "the rest of that range waits for anyone")
        let stolen = try XCTUnwrap(table.claim(onePiece: true))
        XCTAssertEqual([stolen.start, stolen.end], [4 * piece, 5 * piece], "the second range, one piece of it")
        XCTAssertNil(
            SegmentTable(length: length, remaining: [ByteRange(start: 0, end: length)], pieces: 1, minimumSplit: 1000)
                .pieceLength)
    }
}
