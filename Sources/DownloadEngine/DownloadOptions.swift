import ProxyRules

/// What a client may set per download (the `a{sv}` options of Start, already validated).
public struct DownloadOptions: Sendable, Hashable {
    public enum Priority: String, Sendable, Hashable, CaseIterable, Comparable {
        case low, normal, high

        public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rank < rhs.rank }
        var rank: Int { self == .low ? 0 : self == .normal ? 1 : 2 }
    }

    /// Extra request headers (checked for CR/LF and forbidden names).
    public var headers: [String: String] = [:]
    /// Expected SHA-256 of the whole file, lowercase hex.
    public var sha256: String?
    public var priority: Priority = .normal
    /// 0 = unlimited.
    public var maxBytesPerSecond: UInt64 = 0
    /// Ranged connections at once, at most (1–16), when the server allows ranges and the length is
    /// known; the scheduler grants fewer when its connection places are short and more as they free up (`Scheduler`).
    public var connections = 1
    /// Replace an existing destination file.
    public var overwrite = false
    /// false: wait while the network is metered.
    public var allowMetered = true
    /// Seconds; nil = the engine default.
    public var connectTimeout: Double?
    public var stallTimeout: Double?
    /// Whole-transfer limit in seconds; nil = none.
    public var resourceTimeout: Double?
    /// The calling app's desktop file id, for the desktop agent (checked by the service).
    public var desktopEntry: String?
    /// A transfer slower than `lowSpeedLimit` bytes a second for `lowSpeedTime` seconds ends as
    /// `Timeout` (and is retried); nil = the engine's defaults, a limit of 0 = no check.
    public var lowSpeedLimit: UInt64?
    public var lowSpeedTime: Double?
    /// The caller's proxy for this task (`.direct`: none); nil = the daemon's environment
    /// (`ProxyEnvironment`). Its credentials are secrets: stored, sealed in resume data, never
    /// shown or logged (`ProxySetting.description` leaves them out).
    public var proxy: ProxySetting?
    /// A background transfer: it uses only the bandwidth nobody else is using (`BackgroundPacer`).
    public var background = false

    public init() {}

    /// The options that may change while a task exists (ResumeWithData's options): nil leaves
    /// the current value.
    public struct Change: Sendable, Hashable {
        public var priority: Priority?
        public var maxBytesPerSecond: UInt64?
        public var allowMetered: Bool?
        public var proxy: ProxySetting?

        public init(priority: Priority? = nil, maxBytesPerSecond: UInt64? = nil, allowMetered: Bool? = nil, proxy: ProxySetting? = nil) {
            self.priority = priority
            self.maxBytesPerSecond = maxBytesPerSecond
            self.allowMetered = allowMetered
            self.proxy = proxy
        }

        public var isEmpty: Bool { priority == nil && maxBytesPerSecond == nil && allowMetered == nil && proxy == nil }
    }

    public mutating func apply(_ change: Change) {
        if let priority = change.priority { self.priority = priority }
        if let rate = change.maxBytesPerSecond { maxBytesPerSecond = rate }
        if let allow = change.allowMetered { allowMetered = allow }
        if let proxy = change.proxy { self.proxy = proxy }
    }

    /// The most ranged connections one download may open.
    public static let maxConnections = 16

    /// Headers a caller may not set: the engine owns them.
    static let reservedHeaders: Set<String> = [
        "range", "if-range", "accept-encoding", "host", "content-length", "transfer-encoding", "connection",
    ]

    /// Checks headers and the checksum; throws InvalidArgument with a reason.
    public func validate() throws {
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }) else {
                throw DownloadError.invalidArgument("header name '\(name)' is not a valid HTTP token")
            }
            guard !value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                throw DownloadError.invalidArgument("header '\(name)' contains CR, LF or NUL")
            }
            guard !DownloadOptions.reservedHeaders.contains(name.lowercased()) else {
                throw DownloadError.invalidArgument("header '\(name)' is set by the service and cannot be given")
            }
        }
        guard (1...DownloadOptions.maxConnections).contains(connections) else {
            throw DownloadError.invalidArgument("connections must be between 1 and \(DownloadOptions.maxConnections)")
        }
        if let sha256 {
            guard sha256.count == 64, sha256.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
                throw DownloadError.invalidArgument("sha256 must be 64 lowercase hexadecimal digits")
            }
        }
        for (name, value) in [
            ("connect_timeout", connectTimeout), ("stall_timeout", stallTimeout), ("resource_timeout", resourceTimeout),
            ("low_speed_time", lowSpeedTime),
        ] {
            if let value, !(value > 0 && value <= 86_400 * 7) {
                throw DownloadError.invalidArgument("\(name) must be between 0 and 604800 seconds")
            }
        }
    }
}
