import NIOConcurrencyHelpers
import UserFiles
#if canImport(Glibc)
import Glibc
#endif

/// One file helper per task owner, started on first use: a root daemon does every file
/// operation of another user with that user's credentials. The daemon's own user needs none.
public final class FileHelperPool: FileAccessProvider {
    private let executable: String
    private let timeout: Double
    private let helpers = NIOLockedValueBox<[UInt32: FileHelperClient]>([:])

    /// `executable` is `downloads-file-helper`; `timeout` is how long one operation may take
    /// before the helper is killed.
    public init(executable: String, timeout: Double = 30) {
        self.executable = executable
        self.timeout = timeout
    }

    public func files(for owner: UInt32) -> any FileAccess {
        guard owner != geteuid() else { return DirectFileAccess() }
        let helper = helpers.withLockedValue { helpers in
            if let helper = helpers[owner] { return helper }
            let helper = FileHelperClient(uid: owner, executable: executable, timeout: timeout)
            helpers[owner] = helper
            return helper
        }
        return HelperFileAccess(helper: helper)
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
