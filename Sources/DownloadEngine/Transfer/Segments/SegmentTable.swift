import DownloadModel
import NIOConcurrencyHelpers
import NIOCore

/// The ranges of one segmented download and which connection fetches each (aria2's segment
/// man). Ranges waiting for a connection are claimed lowest first; when none waits, a
/// connection takes the second half of the largest range still being fetched (work stealing:
/// the connection that had it stops at the midpoint), so the download never waits for its
/// slowest connection. Every body chunk passes through `write`, which cuts it at its range's
/// end and queues it to the writer under this table's lock, so a checkpoint's snapshot
/// (`checkpoint`) describes exactly the writes queued before its sync.
///
/// With piece hashes (a Metalink document's), each piece completed by a write is checked on the
/// writer's queue after the writes that completed it: a piece that differs goes back to the
/// ranges to fetch, its source is reported (`onPieceFailed`), and a checkpoint records only
/// verified pieces as held (`PieceProgress`). Cuts between ranges fall on piece boundaries, so
/// a piece usually comes from one source.
///
/// Called from the event loops of all the connections and from the run: one lock, held for
/// bookkeeping and the writer's enqueue only (the lock order is in `SessionManager`).
final class SegmentTable: @unchecked Sendable {
    /// A range handed to one connection: fetch `start..<end` (the end may move closer later).
    struct Claim: Sendable, Equatable {
        var id: Int
        var start: Int64
        var end: Int64
    }

    private struct Segment {
        /// The next byte to hand to the writer.
        var position: Int64
        var end: Int64
        var active: Bool
    }

    let length: Int64
    let minimumSplit: Int64
    private let lock = NIOLock()
    private var segments: [Int: Segment] = [:]
    private var nextID = 0
    private var heldBytes: Int64
    private var pieces: PieceProgress?
    /// Sources whose writes are refused from now on (they served a corrupt piece).
    private var refused: Set<Int> = []
    private var pendingChecks = 0
    private var settled: [CheckedContinuation<Void, Never>] = []
    /// Where ranges are cut: the piece length with piece hashes, else anywhere.
    private let alignment: Int64
    /// The piece length when pieces are checked (nil without piece hashes).
    let pieceLength: Int64?
    private let onPieceFailed: (@Sendable (PieceFailure) -> Void)?
    private let onPiecePassed: (@Sendable (_ sources: [Int]) -> Void)?

    /// A piece whose bytes did not match its hash (it is to be fetched again).
    struct PieceFailure: Sendable {
        var piece: Int
        var range: ByteRange
        /// The sources that wrote into it (`MirrorSet` indices; 0 is the URL).
        var sources: [Int]
        /// How many times this piece has failed now.
        var failures: Int
    }

    /// `remaining` are the ranges still to fetch. One range (a new download) is cut into up to
    /// `pieces` equal ranges of at least `minimumSplit` bytes; several (a resumed one) are split
    /// at midpoints, largest first, until there are `pieces` or none is twice `minimumSplit`.
    /// `hashes`: the file's piece hashes, when they describe a file of `length` bytes.
    init(
        length: Int64, remaining: [ByteRange], pieces: Int, minimumSplit: Int64,
        hashes: PieceHashes? = nil, onPieceFailed: (@Sendable (PieceFailure) -> Void)? = nil,
        onPiecePassed: (@Sendable (_ sources: [Int]) -> Void)? = nil
    ) {
        self.length = length
        self.minimumSplit = max(1, minimumSplit)
        heldBytes = ByteRange.held(length: length, remaining: remaining)
        let hashes = hashes.flatMap { $0.fits(length) ? $0 : nil }
        self.pieces = hashes.map { PieceProgress($0, fileLength: length, remaining: remaining) }
        alignment = hashes?.length ?? 1
        pieceLength = hashes?.length
        self.onPieceFailed = onPieceFailed
        self.onPiecePassed = onPiecePassed
        var ranges = remaining.sorted()
        if ranges.count == 1, let range = ranges.first {
            let parts = Int64(max(1, min(pieces, Int(range.count / self.minimumSplit))))
            let cuts =
                [range.start]
                + (1..<max(1, parts)).map { part in
                    Self.cut(range.start + range.count * part / parts, within: range, alignment: alignment)
                } + [range.end]
            ranges = zip(cuts, cuts.dropFirst()).filter { $0 < $1 }.map { ByteRange(start: $0, end: $1) }
        }
        while ranges.count < pieces,
            let largest = ranges.indices.max(by: { ranges[$0].count < ranges[$1].count }),
            ranges[largest].count >= 2 * self.minimumSplit
        {
            let range = ranges[largest]
            let middle = Self.cut(range.start + range.count / 2, within: range, alignment: alignment)
            ranges[largest] = ByteRange(start: range.start, end: middle)
            ranges.insert(ByteRange(start: middle, end: range.end), at: largest + 1)
        }
        for range in ranges {
            segments[nextID] = Segment(position: range.start, end: range.end, active: false)
            nextID += 1
        }
    }

    /// A range for a connection: the waiting one that starts at `start` when given (the first
    /// connection continues its own request), else the lowest waiting one, else the second
    /// half of the largest range being fetched if it is at least twice `minimumSplit`; nil
    /// when there is nothing to take. `onePiece`: with piece hashes, the claim ends at the end of
    /// its first piece (the rest waits): a source not yet proven risks one piece per connection.
    func claim(startingAt start: Int64? = nil, onePiece: Bool = false) -> Claim? {
        lock.withLock {
            let waiting = segments.filter { !$0.value.active && $0.value.position < $0.value.end }
            if let start {
                guard let (id, _) = waiting.first(where: { $0.value.position == start }) else { return nil }
                return take(id, onePiece: onePiece)
            }
            if let (id, _) = waiting.min(by: { $0.value.position < $1.value.position }) {
                return take(id, onePiece: onePiece)
            }
            guard
                let (victim, segment) = segments.filter({ $0.value.active })
                    .max(by: { ($0.value.end - $0.value.position, $1.key) < ($1.value.end - $1.value.position, $0.key) }
                    ),
                segment.end - segment.position >= 2 * minimumSplit
            else { return nil }
            let middle = Self.cut(
                segment.position + (segment.end - segment.position) / 2,
                within: ByteRange(start: segment.position, end: segment.end), alignment: alignment
            )
            // With piece hashes a piece is never cut: one source fetches it whole.
            guard middle % alignment == 0 else { return nil }
            segments[victim]?.end = middle
            let id = nextID
            nextID += 1
            segments[id] = Segment(position: middle, end: segment.end, active: false)
            return take(id, onePiece: onePiece)
        }
    }

    /// `point` moved down to a multiple of `alignment` when that stays inside `range`.
    private static func cut(_ point: Int64, within range: ByteRange, alignment: Int64) -> Int64 {
        guard alignment > 1 else { return point }
        let aligned = point / alignment * alignment
        if aligned > range.start && aligned < range.end { return aligned }
        let up = aligned + alignment
        return up > range.start && up < range.end ? up : point
    }

    private func take(_ id: Int, onePiece: Bool = false) -> Claim? {
        guard var segment = segments[id] else { return nil }
        segment.active = true
        if onePiece, alignment > 1, case let pieceEnd = (segment.position / alignment + 1) * alignment,
            pieceEnd < segment.end
        {
            segments[nextID] = Segment(position: pieceEnd, end: segment.end, active: false)
            nextID += 1
            segment.end = pieceEnd
        }
        segments[id] = segment
        return Claim(id: id, start: segment.position, end: segment.end)
    }

    /// The connection stopped fetching `id`: what is left of it waits for another.
    func release(_ id: Int) {
        lock.withLock { segments[id]?.active = false }
    }

    /// Where `id` continues and ends now (nil once it is complete).
    func range(of id: Int) -> ByteRange? {
        lock.withLock { segments[id].map { ByteRange(start: $0.position, end: $0.end) } }
    }

    /// Hands the part of `buffer` that belongs to `id` to the writer at the segment's position.
    /// Returns the writer's backpressure future, the bytes taken, the bytes the download now holds, and whether
    /// the segment is complete (the rest of the buffer belongs to another range and was dropped).
    /// `source` fetched it; a refused source's bytes are dropped and its request ends (`complete`).
    func write(
        _ id: Int, source: Int = 0, _ buffer: ByteBuffer, writer: PartialFileWriter, eventLoop: EventLoop
    ) -> (written: EventLoopFuture<Void>, accepted: Int64, held: Int64, complete: Bool) {
        lock.withLock {
            guard var segment = segments[id], segment.active, !refused.contains(source) else {
                return (eventLoop.makeSucceededVoidFuture(), 0, heldBytes, true)
            }
            let room = segment.end - segment.position
            var slice = buffer
            if Int64(slice.readableBytes) > room {
                slice = buffer.getSlice(at: buffer.readerIndex, length: Int(room)) ?? ByteBuffer()
            }
            let count = Int64(slice.readableBytes)
            let written =
                count > 0
                ? writer.write(slice, at: segment.position, eventLoop: eventLoop) : eventLoop.makeSucceededVoidFuture()
            if count > 0, let completed = pieces?.wrote(at: segment.position, count: count, source: source) {
                for piece in completed { queueCheck(piece, writer: writer) }
            }
            segment.position += count
            heldBytes += count
            let complete = segment.position >= segment.end
            segments[id] = complete ? nil : segment
            return (written, count, heldBytes, complete)
        }
    }

    /// Checks `piece` on the writer's queue, after the writes that completed it (under the lock).
    private func queueCheck(_ piece: Int, writer: PartialFileWriter) {
        guard let progress = pieces else { return }
        pendingChecks += 1
        let range = progress.range(of: piece)
        let algorithm = progress.hashes.algorithm
        let expected = progress.hashes.hex(of: piece)
        writer.enqueue { writer in
            // A piece that cannot be read back stays unverified: the write error fails the download.
            let digest = try? writer.digest(of: range, algorithm)
            self.checked(piece, matches: digest.map { $0 == expected })
        }
    }

    /// A check's result (on the writer's queue): a piece that differs is to be fetched again.
    private func checked(_ piece: Int, matches: Bool?) {
        let (failure, passedBy, waiting) = lock.withLock {
            () -> (PieceFailure?, [Int], [CheckedContinuation<Void, Never>]) in
            pendingChecks -= 1
            var failure: PieceFailure?
            var passedBy: [Int] = []
            if matches == true {
                passedBy = pieces?.passed(piece) ?? []
            } else if matches == false, let (sources, failures) = pieces?.failed(piece),
                let range = pieces?.range(of: piece)
            {
                segments[nextID] = Segment(position: range.start, end: range.end, active: false)
                nextID += 1
                heldBytes -= range.count
                failure = PieceFailure(piece: piece, range: range, sources: sources, failures: failures)
            }
            guard pendingChecks == 0 else { return (failure, passedBy, []) }
            defer { settled = [] }
            return (failure, passedBy, settled)
        }
        // Reported before any waiting connection claims again, so it never goes back to that source.
        if let failure { onPieceFailed?(failure) }
        if !passedBy.isEmpty { onPiecePassed?(passedBy) }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once every piece check queued so far is done (at once without any).
    func settle() async {
        await withCheckedContinuation { continuation in
            let now = lock.withLock {
                guard pendingChecks > 0 else { return true }
                settled.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Writes from `sources` are dropped from now on: their requests end at their next body part.
    func refuse(_ sources: [Int]) {
        lock.withLock { refused.formUnion(sources) }
    }

    /// Pieces verified so far, and how many there are (nil without piece hashes).
    var verifiedPieces: (verified: Int, count: Int)? {
        lock.withLock { pieces.map { ($0.verifiedCount, $0.count) } }
    }

    var held: Int64 { lock.withLock { heldBytes } }

    var isComplete: Bool { lock.withLock { segments.values.allSatisfy { $0.position >= $0.end } } }

    /// The ranges still to fetch, in order, adjacent ones joined.
    var remaining: [ByteRange] { lock.withLock { remainingLocked() } }

    private func remainingLocked() -> [ByteRange] {
        var result: [ByteRange] = []
        for segment in segments.values.sorted(by: { $0.position < $1.position }) where segment.position < segment.end {
            if let last = result.last, last.end == segment.position {
                result[result.count - 1].end = segment.end
            } else {
                result.append(ByteRange(start: segment.position, end: segment.end))
            }
        }
        return result
    }

    /// Runs `body` with what a checkpoint records as still to fetch, under the lock, so that
    /// what `body` queues on the writer comes after exactly the writes those ranges leave out:
    /// the ranges still to fetch and, with piece hashes, every piece not verified yet.
    func withRemaining<T>(_ body: ([ByteRange]) -> T) -> T {
        lock.withLock {
            let remaining = remainingLocked()
            return body(pieces?.recorded(remaining) ?? remaining)
        }
    }
}
