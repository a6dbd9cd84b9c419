import DBus

/// A task's `GetMetrics` reply: the task's times and counts (`queued_at`, `started_at`,
/// `first_byte_at`, `ended_at`, `attempts`, `redirects`, `restarts`, `bytes_by_source`) and one
/// dictionary per request (`url`, `source`, `range`, `protocol`, `status`, the phase times…).
public struct TaskTimings: Sendable {
    public var task: [String: DBusValue]
    public var transactions: [[String: DBusValue]]

    public init(task: [String: DBusValue], transactions: [[String: DBusValue]]) {
        self.task = task
        self.transactions = transactions
    }

    /// A time of `entry` in Unix microseconds, when it is there.
    public static func time(_ name: String, in entry: [String: DBusValue]) -> UInt64? { entry[name]?.uint64Value }

    /// The phases of one request as curl's `-w` names them, each from the request's
    /// `fetch_start`, in milliseconds: those the service saw, in order.
    public static func phases(of transaction: [String: DBusValue]) -> [(name: String, milliseconds: Double)] {
        guard let start = time("fetch_start", in: transaction) else { return [] }
        let steps: [(String, String)] = [
            ("lookup_end", "name looked up"), ("connect_end", "connected"), ("tls_end", "TLS done"),
            ("request_start", "request sent"),
            ("response_start", "first byte"), ("response_end", "done"),
        ]
        return steps.compactMap { key, name in
            time(key, in: transaction).map { (name, Double(Int64($0) - Int64(start)) / 1000) }
        }
    }
}
