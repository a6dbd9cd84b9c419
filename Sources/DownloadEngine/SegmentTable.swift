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

    /// `remaining` are the ranges still to fetch. One range (a new download) is cut into up to
    /// `pieces` equal ranges of at least `minimumSplit` bytes; several (a resumed one) are split
    /// at midpoints, largest first, until there are `pieces` or none is twice `minimumSplit`.
    init(length: Int64, remaining: [ByteRange], pieces: Int, minimumSplit: Int64) {
        self.length = length
        self.minimumSplit = max(1, minimumSplit)
        heldBytes = ByteRange.held(length: length, remaining: remaining)
        var ranges = remaining.sorted()
        if ranges.count == 1, let range = ranges.first {
            let parts = Int64(max(1, min(pieces, Int(range.count / self.minimumSplit))))
            ranges = (0..<parts).map { part in
                ByteRange(start: range.start + range.count * part / parts, end: range.start + range.count * (part + 1) / parts)
            }
        }
        while ranges.count < pieces,
              let largest = ranges.indices.max(by: { ranges[$0].count < ranges[$1].count }),
              ranges[largest].count >= 2 * self.minimumSplit
        {
            let range = ranges[largest]
            let middle = range.start + range.count / 2
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
    /// when there is nothing to take.
    func claim(startingAt start: Int64? = nil) -> Claim? {
        lock.withLock {
            let waiting = segments.filter { !$0.value.active && $0.value.position < $0.value.end }
            if let start {
                guard let (id, _) = waiting.first(where: { $0.value.position == start }) else { return nil }
                return take(id)
            }
            if let (id, _) = waiting.min(by: { $0.value.position < $1.value.position }) {
                return take(id)
            }
            guard let (victim, segment) = segments.filter({ $0.value.active })
                .max(by: { ($0.value.end - $0.value.position, $1.key) < ($1.value.end - $1.value.position, $0.key) }),
                segment.end - segment.position >= 2 * minimumSplit
            else { return nil }
            let middle = segment.position + (segment.end - segment.position) / 2
            segments[victim]?.end = middle
            let id = nextID
            nextID += 1
            segments[id] = Segment(position: middle, end: segment.end, active: true)
            return Claim(id: id, start: middle, end: segment.end)
        }
    }

    private func take(_ id: Int) -> Claim? {
        guard var segment = segments[id] else { return nil }
        segment.active = true
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
    func write(
        _ id: Int, _ buffer: ByteBuffer, writer: PartialFileWriter, eventLoop: EventLoop
    ) -> (written: EventLoopFuture<Void>, accepted: Int64, held: Int64, complete: Bool) {
        lock.withLock {
            guard var segment = segments[id], segment.active else {
                return (eventLoop.makeSucceededVoidFuture(), 0, heldBytes, true)
            }
            let room = segment.end - segment.position
            var slice = buffer
            if Int64(slice.readableBytes) > room {
                slice = buffer.getSlice(at: buffer.readerIndex, length: Int(room)) ?? ByteBuffer()
            }
            let count = Int64(slice.readableBytes)
            let written = count > 0
                ? writer.write(slice, at: segment.position, eventLoop: eventLoop) : eventLoop.makeSucceededVoidFuture()
            segment.position += count
            heldBytes += count
            let complete = segment.position >= segment.end
            segments[id] = complete ? nil : segment
            return (written, count, heldBytes, complete)
        }
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

    /// Runs `body` with the ranges still to fetch, under the lock, so that what `body` queues
    /// on the writer comes after exactly the writes those ranges leave out.
    func withRemaining<T>(_ body: ([ByteRange]) -> T) -> T {
        lock.withLock { body(remainingLocked()) }
    }
}
