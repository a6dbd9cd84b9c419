import Dispatch
import DownloadModel
import NIOConcurrencyHelpers
import UserFiles
#if canImport(Glibc)
import Glibc
#endif

/// File helpers per task owner, started on first use: a root daemon does every file operation
/// of another user with that user's credentials. The daemon's own user needs none. One process
/// serves a user's requests one at a time; up to `processesPerUser` when requests meet (many
/// downloads starting and ending at once, see `FileHelperClient`).
public final class FileHelperPool: FileAccessProvider {
    private let executable: String
    private let timeout: Double
    private let processesPerUser: Int
    /// The daemon's own uid, whose files need no helper (read once: it never changes, and
    /// every task asked for it several times).
    private let ownUID = geteuid()
    private let helpers = NIOLockedValueBox<[UInt32: FileHelperClient]>([:])
    /// Dispatch sources are thread-safe; only set up in init and cancelled in deinit.
    nonisolated(unsafe) private let reaper: DispatchSourceTimer

    /// `executable` is `downloads-file-helper`; `timeout` is how long one operation may take
    /// before the helper is killed; a helper unused for `idleTime` seconds exits (the next
    /// operation starts a new one).
    public init(executable: String, timeout: Double = 30, idleTime: Double = 300, processesPerUser: Int = 4) {
        self.executable = executable
        self.timeout = timeout
        self.processesPerUser = processesPerUser
        // Its own queue: ending a helper waits for the request it may be serving (up to
        // `timeout` for a hung one), which must not hold a thread of the pool tasks run on.
        reaper = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "org.example.Downloads.helper-reaper"))
        let helpers = self.helpers
        reaper.schedule(deadline: .now() + idleTime / 4, repeating: idleTime / 4)
        reaper.setEventHandler {
            for helper in helpers.withLockedValue({ Array($0.values) }) { helper.stopIfIdle(for: idleTime) }
        }
        reaper.resume()
    }

    deinit { reaper.cancel() }

    public func files(for owner: UInt32) -> any FileAccess {
        guard owner != ownUID else { return DirectFileAccess() }
        return HelperFileAccess(helper: helper(for: owner))
    }

    public func files(for owner: UInt32, below anchor: DescriptorAnchor) -> any FileAccess {
        guard owner != ownUID else { return DirectFileAccess(anchor: anchor) }
        return HelperFileAccess(helper: helper(for: owner), anchor: anchor)
    }

    private func helper(for owner: UInt32) -> FileHelperClient {
        helpers.withLockedValue { helpers in
            if let helper = helpers[owner] { return helper }
            let helper = FileHelperClient(
                uid: owner, executable: executable, timeout: timeout, processes: processesPerUser)
            helpers[owner] = helper
            return helper
        }
    }

    /// The running helpers' pids by uid (for tests and diagnostics).
    public var running: [UInt32: pid_t] {
        helpers.withLockedValue { $0.compactMapValues(\.pid) }
    }

    /// Ends every helper.
    public func stop() {
        for helper in helpers.withLockedValue({ Array($0.values) }) { helper.stop() }
    }
}
