import Foundation

/// Where a task's time went (`URLSessionTaskMetrics`' shape, `GetMetrics`): when it started,
/// got its first byte and ended, how many requests, redirects and restarts it took, what each
/// source served, and its last `kept` requests (`TransactionMetrics`). Made when a task first
/// runs (a queued task carries none), kept with the task in the store.
public struct TaskMetrics: Sendable, Hashable, Codable {
    /// How many requests are kept, the newest.
    public static let kept = 50
    /// The most bytes of a URL kept (a request's, a source's name): a server's redirect chooses
    /// the URL, and 10 redirects of 70 KB each a task took a thousand tasks' metrics to 824 MB in
    /// memory and 774 MB in the database. A longer one is cut and says so (`shortened`).
    public static let maxURLBytes = 512

    /// Unix microseconds.
    public var startedAt: Int64
    public var firstByteAt: Int64?
    public var endedAt: Int64?
    /// Every request sent (not only those kept), the redirects among them, the restarts from 0.
    public var attempts: Int = 0
    public var redirects: Int = 0
    public var restarts: Int = 0
    /// Body bytes each source (the task's URL, each mirror) served.
    public var bytesBySource: [String: Int64] = [:]
    public private(set) var transactions: [TransactionMetrics] = []

    public init(startedAt: Int64) {
        self.startedAt = startedAt
    }

    /// Now, in Unix microseconds.
    public static var now: Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }

    /// One request more: counted, its bytes given to `source` (the task's URL or the mirror it
    /// went to), and kept among the newest.
    public mutating func add(_ transaction: TransactionMetrics, from source: String) {
        attempts += 1
        if (300..<400).contains(transaction.status) { redirects += 1 }
        if transaction.bytesReceived > 0 {
            bytesBySource[Self.shortened(source), default: 0] += transaction.bytesReceived
            if firstByteAt == nil { firstByteAt = transaction.responseStart ?? transaction.responseEnd }
        }
        var transaction = transaction
        transaction.url = Self.shortened(transaction.url)
        transactions.append(transaction)
        if transactions.count > Self.kept { transactions.removeFirst(transactions.count - Self.kept) }
    }

    /// `url` when it is at most `maxURLBytes` long; else its first bytes (whole characters) and
    /// `…[N bytes]`, N its whole length.
    public static func shortened(_ url: String) -> String {
        let length = url.utf8.count
        guard length > maxURLBytes else { return url }
        let mark = "…[\(length) bytes]"
        let room = maxURLBytes - mark.utf8.count
        var kept = ""
        var used = 0
        for character in url {
            used += character.utf8.count
            guard used <= room else { break }
            kept.append(character)
        }
        return kept + mark
    }

    enum CodingKeys: String, CodingKey {
        case startedAt = "started_at"
        case firstByteAt = "first_byte_at"
        case endedAt = "ended_at"
        case attempts, redirects, restarts
        case bytesBySource = "bytes_by_source"
        case transactions
    }
}
