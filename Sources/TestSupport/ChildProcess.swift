import Foundation

/// A child process started with posix_spawn, its stdin/stdout/stderr on pipes. Waiting uses
/// `waitpid`, so no run loop is involved.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    /// Our ends of the child's stdout and stderr (read them), and stdin (write to it).
    public let stdout: FileHandle
    public let stderr: FileHandle
    public let stdin: FileHandle
    private let lock = NSLock()
    private var exitStatus: Int32?

    /// Starts `arguments[0]`, looked up in PATH.
    public init(_ arguments: [String], environment: [String: String] = [:]) throws {
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        var outPipe: [Int32] = [0, 0]
        var errPipe: [Int32] = [0, 0]
        var inPipe: [Int32] = [0, 0]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0, pipe(&inPipe) == 0 else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        // Close-on-exec (Glibc's module has no pipe2): a child started later, by this test or
        // another's thread, must not inherit these pipes and hold them open (the daemon did,
        // hundreds); the dup2 below gives our child its own ends without the flag.
        for fd in outPipe + errPipe + inPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A process group of its own, so that stop() reaches its children too.
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let result = posix_spawnp(&child, arguments[0], &actions, &attributes, argv, envp)
        close(inPipe[0])
        close(outPipe[1])
        close(errPipe[1])
        guard result == 0 else {
            close(inPipe[1]); close(outPipe[0]); close(errPipe[0])
            throw POSIXError(.init(rawValue: result) ?? .EIO)
        }
        pid = child
        stdout = FileHandle(fileDescriptor: outPipe[0], closeOnDealloc: true)
        stderr = FileHandle(fileDescriptor: errPipe[0], closeOnDealloc: true)
        stdin = FileHandle(fileDescriptor: inPipe[1], closeOnDealloc: true)
    }

    /// Sends a signal to the child's whole process group.
    public func signal(_ signal: Int32) {
        kill(-pid, signal)
        kill(pid, signal)
    }

    /// Blocks until the child exits; returns its exit status, or 128+signal.
    @discardableResult
    public func wait() -> Int32 {
        if let status = lock.withLock({ exitStatus }) { return status }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        lock.withLock { exitStatus = code }
        return code
    }

    /// Whether the child has exited (reaps it if so).
    public var hasExited: Bool {
        if lock.withLock({ exitStatus }) != nil { return true }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        guard result == pid else { return false }
        let code: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        lock.withLock { exitStatus = code }
        return true
    }

    /// SIGTERM, then SIGKILL after `grace` seconds; waits for the exit.
    public func stop(grace: TimeInterval = 5) {
        guard !hasExited else { return }
        signal(SIGTERM)
        let deadline = Date().addingTimeInterval(grace)
        while !hasExited && Date() < deadline { usleep(10_000) }
        if !hasExited {
            signal(SIGKILL)
            wait()
        }
    }
}
