/// Bytes `start..<end` of a resource (`end` exclusive): what a segmented download still has to
/// fetch. Written in the store's `segment` table and in resume data.
public struct ByteRange: Sendable, Hashable, Codable, Comparable {
    public var start: Int64
    public var end: Int64

    public init(start: Int64, end: Int64) {
        self.start = start
        self.end = end
    }

    public var count: Int64 { end - start }

    public static func < (a: ByteRange, b: ByteRange) -> Bool { a.start < b.start }

    /// Whether `ranges` can describe what is left of a resource of `length` bytes: each range
    /// non-empty and inside it, in order, not overlapping.
    public static func valid(_ ranges: [ByteRange], length: Int64) -> Bool {
        guard length > 0 else { return false }
        var previousEnd: Int64 = 0
        for range in ranges {
            guard range.start >= previousEnd, range.start < range.end, range.end <= length else { return false }
            previousEnd = range.end
        }
        return true
    }

    /// Bytes of a resource of `length` outside `ranges` (what a segmented download holds).
    public static func held(length: Int64, remaining ranges: [ByteRange]) -> Int64 {
        length - ranges.reduce(0) { $0 + $1.count }
    }

    /// The bytes of `ranges` (overlapping or not) as sorted, disjoint ranges, adjacent ones joined.
    public static func union(_ ranges: [ByteRange]) -> [ByteRange] {
        var result: [ByteRange] = []
        for range in ranges.sorted() where range.end > range.start {
            if let last = result.last, range.start <= last.end {
                result[result.count - 1].end = max(last.end, range.end)
            } else {
                result.append(range)
            }
        }
        return result
    }
}
