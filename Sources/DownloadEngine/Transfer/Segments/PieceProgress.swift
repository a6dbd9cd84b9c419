import DownloadModel
/// Which pieces of a segmented download (`PieceHashes`) are complete and verified, which
/// sources wrote into each, and how often each failed its check: aria2's piece bitfield. Pure
/// bookkeeping (kept by `SegmentTable` under its lock), tested without I/O.
///
/// Durability rests on one rule: only verified pieces are recorded as held (`recorded`). A
/// piece still being fetched, or written whole but not yet checked, is recorded as still to
/// fetch, so a restart (or resume data) keeps exactly the verified pieces and never checks a
/// piece twice; what a crash costs grows by the pieces being fetched then (one per connection).
struct PieceProgress: Sendable {
    let hashes: PieceHashes
    let fileLength: Int64
    /// Bytes of each piece not written yet.
    private var missing: [Int64]
    private var verified: [Bool]
    /// The sources (`MirrorSet` indices below 64) that wrote into each piece since it was last emptied.
    private var writers: [UInt64]
    private var failures: [Int: Int] = [:]

    /// `remaining`: the ranges still to fetch. A piece with none of its bytes among them was
    /// recorded as held, so it was verified before (see the rule above).
    init(_ hashes: PieceHashes, fileLength: Int64, remaining: [ByteRange]) {
        self.hashes = hashes
        self.fileLength = fileLength
        let count = hashes.count
        missing = [Int64](repeating: 0, count: count)
        writers = [UInt64](repeating: 0, count: count)
        for range in remaining {
            for piece in PieceProgress.pieces(overlapping: range, length: hashes.length, count: count) {
                let bytes = hashes.range(of: piece, fileLength: fileLength)
                missing[piece] += min(bytes.end, range.end) - max(bytes.start, range.start)
            }
        }
        verified = missing.map { $0 == 0 }
    }

    var count: Int { hashes.count }
    var verifiedCount: Int { verified.lazy.filter { $0 }.count }

    func range(of piece: Int) -> ByteRange { hashes.range(of: piece, fileLength: fileLength) }

    /// `count` bytes at `start` were written by `source`: the pieces this completed (to check).
    mutating func wrote(at start: Int64, count: Int64, source: Int) -> [Int] {
        guard count > 0 else { return [] }
        var completed: [Int] = []
        let written = ByteRange(start: start, end: start + count)
        for piece in PieceProgress.pieces(overlapping: written, length: hashes.length, count: self.count) {
            let bytes = range(of: piece)
            let overlap = min(bytes.end, written.end) - max(bytes.start, written.start)
            guard overlap > 0, missing[piece] > 0 else { continue }
            missing[piece] = max(0, missing[piece] - overlap)
            if source >= 0 && source < 64 { writers[piece] |= 1 << UInt64(source) }
            if missing[piece] == 0 { completed.append(piece) }
        }
        return completed
    }

    /// Piece `piece` matched its hash: returns the sources that wrote it.
    @discardableResult
    mutating func passed(_ piece: Int) -> [Int] {
        verified[piece] = true
        return sources(of: piece)
    }

    private func sources(of piece: Int) -> [Int] {
        (0..<64).filter { writers[piece] & (1 << UInt64($0)) != 0 }
    }

    /// Piece `piece` did not match: it is to be fetched again whole. Returns the sources that
    /// wrote it and how many times it has failed now.
    mutating func failed(_ piece: Int) -> (sources: [Int], failures: Int) {
        let sources = sources(of: piece)
        missing[piece] = range(of: piece).count
        writers[piece] = 0
        verified[piece] = false
        failures[piece, default: 0] += 1
        return (sources, failures[piece] ?? 1)
    }

    /// What a checkpoint records as still to fetch: `remaining` and every piece not verified,
    /// in order, adjacent ranges joined.
    func recorded(_ remaining: [ByteRange]) -> [ByteRange] {
        var ranges = remaining
        var piece = 0
        while piece < count {
            guard !verified[piece] else {
                piece += 1
                continue
            }
            // A run of unverified pieces is one range.
            let start = range(of: piece).start
            while piece < count && !verified[piece] { piece += 1 }
            ranges.append(ByteRange(start: start, end: range(of: piece - 1).end))
        }
        return ByteRange.union(ranges)
    }

    /// The pieces with a byte in `range`.
    static func pieces(overlapping range: ByteRange, length: Int64, count: Int) -> Range<Int> {
        guard range.end > range.start, length > 0 else { return 0..<0 }
        let first = Int(range.start / length)
        let last = Int((range.end - 1) / length)
        return min(first, count)..<min(last + 1, count)
    }
}
