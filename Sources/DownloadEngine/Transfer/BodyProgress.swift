import DownloadModel
import NIOCore

/// What one response's body does as it arrives, decided without I/O: when a checkpoint is due,
/// how long the bandwidth limit holds the next body part back, and when the request is stalled,
/// too slow, or without an answer for too long. Events in (the request sent, the head, a body
/// part, a new limit, a watchdog tick; every one with the time it happened), verdicts out.
/// `TransferDelegate` feeds it on the request's event loop and performs what it says (asks the
/// writer for the checkpoint, schedules the wait, fails the request); `BodyProgressTests` tests
/// each rule alone.
struct BodyProgress {
    struct Settings: Sendable {
        /// No response head within this of the request (or of the last activity before it).
        var connectTimeout: TimeAmount
        /// No body byte within this.
        var stallTimeout: TimeAmount
        /// Bytes per second (0: no check), counted over each `lowSpeedTime` window of the body.
        var lowSpeedLimit: UInt64
        var lowSpeedTime: TimeAmount
        /// A checkpoint every `checkpointBytes` or `checkpointInterval`, whichever comes first.
        var checkpointBytes: Int64
        var checkpointInterval: TimeAmount

        /// The settings from seconds, as the task's options and the configuration give them.
        static func seconds(
            connectTimeout: Double, stallTimeout: Double, lowSpeedLimit: UInt64, lowSpeedTime: Double,
            checkpointBytes: Int64, checkpointInterval: Double
        ) -> Settings {
            func amount(_ seconds: Double) -> TimeAmount {
                .milliseconds(Int64(min(seconds, BodyProgress.longest) * 1000))
            }
            return Settings(
                connectTimeout: amount(connectTimeout), stallTimeout: amount(stallTimeout),
                lowSpeedLimit: lowSpeedLimit,
                lowSpeedTime: amount(lowSpeedTime), checkpointBytes: checkpointBytes,
                checkpointInterval: amount(checkpointInterval)
            )
        }

        /// A task's settings, a download's body or an upload's alike: its own options where it
        /// has them, else the service's; `speedWindow` shortens the minimum-speed window (a
        /// mirrored download's connections are judged sooner).
        static func of(
            _ options: DownloadOptions, _ configuration: SessionManager.Configuration, speedWindow: Double? = nil
        ) -> Settings {
            .seconds(
                connectTimeout: options.connectTimeout ?? configuration.connectTimeout,
                stallTimeout: options.stallTimeout ?? configuration.stallTimeout,
                lowSpeedLimit: options.lowSpeedLimit ?? configuration.lowSpeedLimit,
                lowSpeedTime: min(options.lowSpeedTime ?? configuration.lowSpeedTime, speedWindow ?? .infinity),
                checkpointBytes: configuration.checkpointBytes, checkpointInterval: configuration.checkpointInterval
            )
        }
    }

    let settings: Settings
    /// Where the next body byte goes in the file.
    private(set) var position: Int64 = 0
    /// The head arrived, and whether its body is written (the speed checks apply only then).
    private var hasHead = false
    private var writing = false
    private var lastCheckpointPosition: Int64 = 0
    private var lastCheckpointTime: NIODeadline
    /// The last sign of life: the request sent, the head, a body part, or the end of a wait the
    /// limit imposes (a limit is no stall).
    private var lastActivity: NIODeadline
    /// The minimum-speed window: when it began and the body bytes received since.
    private var speedWindowStart: NIODeadline?
    private var speedWindowBytes: Int64 = 0
    /// The bandwidth limit (bytes per second, 0: none) and the bytes counted against it since `rateStart`.
    private(set) var rateLimit: UInt64 = 0
    private var rateStart: NIODeadline
    private var rateBytes: Int64 = 0

    /// The longest step of a wait for the limit: the limit is read again after each, so a limit
    /// raised or lifted while waiting applies at once.
    static let rateStep = TimeAmount.milliseconds(250)
    /// The longest time anything here counts in seconds, a year: a wait or a window that long is
    /// as good as for ever, and stays within Int64 nanoseconds.
    static let longest: Double = 365 * 86400

    init(settings: Settings, now: NIODeadline) {
        self.settings = settings
        lastCheckpointTime = now
        lastActivity = now
        rateStart = now
    }

    // MARK: Events

    /// The request went out (again, for each redirect's hop on one connection).
    mutating func requestSent(at now: NIODeadline) {
        lastActivity = now
    }

    /// The head arrived; `offset` is where its body goes (nil: its body is read, not written),
    /// `limit` the bandwidth limit now. Counting starts here: checkpoints, the limit, the speed window.
    mutating func headReceived(writingAt offset: Int64?, limit: UInt64, at now: NIODeadline) {
        hasHead = true
        writing = offset != nil
        position = offset ?? 0
        lastCheckpointPosition = position
        lastCheckpointTime = now
        lastActivity = now
        rateStart = now
        rateLimit = limit
        rateBytes = 0
    }

    /// An upload's request body goes out from `now` (its request head went): it is the body the
    /// checks measure, as a download's written body is (the stall timeout, the minimum speed;
    /// `limit` the bandwidth limit now, read again with `limitChanged`). No checkpoints.
    mutating func sendingBody(limit: UInt64, at now: NIODeadline) {
        headReceived(writingAt: 0, limit: limit, at: now)
    }

    /// An upload's body went whole: waiting for the answer is no transfer to be measured (the
    /// server may think a while); only the stall timeout applies.
    mutating func bodyWent(at now: NIODeadline) {
        writing = false
        lastActivity = now
    }

    /// A part of a body that is read, not written (a Metalink document): a sign of life only.
    mutating func documentPart(at now: NIODeadline) {
        lastActivity = now
    }

    /// `count` body bytes were handed to the writer. Returns whether a checkpoint of everything
    /// so far is due (then counted as made: the caller asks for it, and tells the limit then in
    /// force through `limitChanged`, before `throttle`).
    mutating func bodyPart(_ count: Int64, at now: NIODeadline) -> Bool {
        position += count
        speedWindowBytes += count
        lastActivity = now
        guard
            position - lastCheckpointPosition >= settings.checkpointBytes
                || now - lastCheckpointTime >= settings.checkpointInterval
        else {
            return false
        }
        lastCheckpointPosition = position
        lastCheckpointTime = now
        return true
    }

    /// The limit is `limit` from `now` on: the bytes still owed at the old one (received beyond
    /// what it allowed so far) are owed at the new one.
    mutating func limitChanged(to limit: UInt64, at now: NIODeadline) {
        guard limit != rateLimit else { return }
        let elapsed = Double((now - rateStart).nanoseconds) / 1e9
        let owed = rateLimit == 0 ? 0 : Int64(max(0, Double(rateBytes) - elapsed * Double(rateLimit)))
        rateLimit = limit
        rateStart = now
        rateBytes = owed
    }

    /// The body part of `count` bytes just received counts against the limit: nil when the next
    /// part may come at once (most parts of a transfer under its limit), else when it may.
    mutating func throttle(_ count: Int64, at now: NIODeadline) -> NIODeadline? {
        guard rateLimit > 0 else { return nil }
        rateBytes += count
        let allowed = allowedAt
        return allowed > now ? allowed : nil
    }

    /// One step of a wait for the limit, which is `limit` now: nil when the next part may come,
    /// else when to look again (at most `rateStep` away). The wait counts as activity.
    mutating func rateWaitStep(limit: UInt64, at now: NIODeadline) -> NIODeadline? {
        limitChanged(to: limit, at: now)
        let allowed = allowedAt
        guard rateLimit > 0, allowed > now else { return nil }
        lastActivity = allowed
        return min(allowed, now + Self.rateStep)
    }

    /// The watchdog's look at `now`: why the request fails, or nil while it is alive. No head
    /// within `connectTimeout`, no byte within `stallTimeout`; then, for a body being written,
    /// the minimum speed over each window: fewer than `lowSpeedLimit` bytes a second (lowered to
    /// half a limit below it, so a transfer held to its limit is never taken for a slow one),
    /// or below `floor(measured speed)` (a mirror far slower than the others; 0: none).
    mutating func check(at now: NIODeadline, floor: (Double) -> UInt64 = { _ in 0 }) -> String? {
        let limit = hasHead ? settings.stallTimeout : settings.connectTimeout
        if now - lastActivity > limit {
            return hasHead
                ? "no data for \(limit.nanoseconds / 1_000_000_000) s (stalled)"
                : "no response within \(limit.nanoseconds / 1_000_000_000) s"
        }
        guard hasHead, writing else { return nil }
        guard let start = speedWindowStart else {
            speedWindowStart = now
            speedWindowBytes = 0
            return nil
        }
        let elapsed = now - start
        guard elapsed >= settings.lowSpeedTime else { return nil }
        let base = rateLimit > 0 ? min(settings.lowSpeedLimit, rateLimit / 2) : settings.lowSpeedLimit
        let seconds = Double(elapsed.nanoseconds) / 1e9
        let speed = Double(speedWindowBytes) / seconds
        speedWindowStart = now
        speedWindowBytes = 0
        let minimum = max(base, floor(speed))
        guard minimum > 0, speed < Double(minimum) else { return nil }
        return String(format: "slower than %llu bytes/s for %.0f s (%.1f bytes/s)", minimum, seconds, speed)
    }

    /// When the bytes counted so far are within the limit (at most `longest` away).
    private var allowedAt: NIODeadline {
        rateStart + .nanoseconds(Int64(min(Double(rateBytes) / Double(max(rateLimit, 1)), Self.longest) * 1e9))
    }
}
