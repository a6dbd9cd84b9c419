import DBus
import DownloadsClient

/// One of the user's tasks as the agent presents it.
struct AgentTask {
    var status: DownloadTaskStatus
    /// Its KDE job view, once the server gave one.
    var view: ObjectPath?
    /// A view is asked for (or its delay runs).
    var viewPending = false
    /// A job view showed it: the desktop notifies its end itself.
    var shownByJobView = false
    /// The notification it has (replaced, not stacked).
    var notification: UInt32?
    /// For the speed: the bytes and time of the last progress.
    var lastBytes: Int64 = 0
    var lastTime: ContinuousClock.Instant?
    var speed: UInt64 = 0
    /// The bytes its first reading (`GetAll`) found: `Progress` signals sent before that reading
    /// but read after it say less, and are passed over until one says as much (then none is).
    var readFloor: Int64?

    init(status: DownloadTaskStatus) {
        self.status = status
        lastBytes = status.bytesWritten
    }

    var isActive: Bool { !status.isEnded }

    /// What people are shown: the app's `title`, else the file's name (the last part of its path).
    var name: String { status.displayName }

    /// Bytes per second from two progress readings, smoothed.
    mutating func recordProgress(_ total: Int64, at now: ContinuousClock.Instant) {
        if let floor = readFloor {
            guard total >= floor else { return }
            readFloor = nil
        }
        status.bytesWritten = total
        // First reading, or a restart from zero: a new starting point.
        guard let last = lastTime, total >= lastBytes else {
            (lastBytes, lastTime) = (total, now)
            return
        }
        let elapsed = now - last
        guard elapsed > .milliseconds(50) else { return }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let current = Double(total - lastBytes) / seconds
        speed = speed == 0 ? UInt64(current) : UInt64(0.7 * Double(speed) + 0.3 * current)
        (lastBytes, lastTime) = (total, now)
    }
}
