#if canImport(Glibc)
import Glibc
#endif

/// The durable boundaries where a crash must lose nothing, named so a test can kill the process
/// at each of them: `DOWNLOADSD_CRASH_AT=name:n` (n defaults to 1) makes the n-th arrival at
/// `name` write one line to stderr and SIGKILL the process, as `kill -9` would. Compiled only into
/// debug builds (`swift build`, the tests); in a release build (the .deb) `reached` is empty and the
/// variable means nothing. `CrashPointTests` runs every point.
public enum CrashPoint: String, CaseIterable, Sendable {
    /// A one-stream checkpoint's fdatasync is done; its offset is not recorded yet.
    case checkpointSynced = "checkpoint-synced"
    /// A segmented download's checkpoint (one fdatasync for every range) is done; the ranges are
    /// not recorded yet.
    case segmentsSynced = "segments-synced"
    /// Inside the transaction that records a segmented checkpoint, the ranges written, not committed.
    case segmentsSaving = "segments-saving"
    /// The whole file is fsynced (and checked), and the record naming the partial file (its
    /// device and inode) is committed; not renamed into place yet.
    case fileSynced = "file-synced"
    /// The file is renamed into place; the task's `finished` row is not written yet.
    case published = "published"
    /// An atomic group's decision to publish every file is committed; no file is renamed yet.
    case groupDecided = "group-decided"
    /// Inside the newest schema migration's transaction (a fresh state directory runs them all).
    case migrating = "migrating"
    /// A session's last end is saved with the completion call it makes due; `EventsFinished`
    /// has not gone out for it yet.
    case endedUnreported = "ended-unreported"
    /// The completion handler answered; the pending call is not removed yet (the one duplicate).
    case completionAnswered = "completion-answered"
    /// The file helper created a partial file and has not replied yet.
    case helperCreated = "helper-created"

    public static let environmentVariable = "DOWNLOADSD_CRASH_AT"

    /// Kills the process here when this is the armed point's n-th arrival.
    @inline(__always)
    public func reached() {
        #if DEBUG
        CrashPointTrigger.shared.arrive(self)
        #endif
    }
}

#if DEBUG
/// The armed point (read once from the environment) and how often it was reached.
final class CrashPointTrigger: @unchecked Sendable {
    static let shared = CrashPointTrigger()

    private let armed: (point: CrashPoint, arrival: Int)?
    private var arrivals = 0
    private var lock = pthread_mutex_t()

    private init() {
        pthread_mutex_init(&lock, nil)
        guard let value = getenv(CrashPoint.environmentVariable).map({ String(cString: $0) }), !value.isEmpty else {
            armed = nil
            return
        }
        let parts = value.split(separator: ":", maxSplits: 1).map(String.init)
        guard let point = CrashPoint(rawValue: parts[0]) else {
            Self.say("\(CrashPoint.environmentVariable): no crash point '\(parts[0])'; none armed\n")
            armed = nil
            return
        }
        armed = (point, parts.count > 1 ? max(1, Int(parts[1]) ?? 1) : 1)
    }

    func arrive(_ point: CrashPoint) {
        guard let armed, armed.point == point else { return }
        pthread_mutex_lock(&lock)
        arrivals += 1
        let now = arrivals == armed.arrival
        pthread_mutex_unlock(&lock)
        guard now else { return }
        Self.say("crash point \(point.rawValue) reached (\(armed.arrival)): killing the process\n")
        kill(getpid(), SIGKILL)
        pause()
    }

    private static func say(_ line: String) {
        var line = line
        line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
    }
}
#endif
