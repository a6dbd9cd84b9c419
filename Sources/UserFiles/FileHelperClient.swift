import CUserFiles
import CrashPoints
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's side of one user's file helper: starts it on first use, sends one request at a
/// time and waits for the answer. A helper that does not answer within the timeout (a hung
/// network mount) is killed; only this user's operations fail, and the next one starts a new
/// helper.
///
/// With `processes` > 1, up to that many helper processes serve the user, each one request at a
/// time: a request goes to the first that is free (so one process serves a user who does one
/// thing at a time, and more start only when requests meet), or waits for one in turn. Requests
/// of one task never overlap (its file calls are made in order on its I/O queue), so which
/// process answers does not matter; a thousand small downloads at once no longer queue behind
/// one process (Benchmarks/RESULTS.md, the system-bus row).
public final class FileHelperClient: Sendable {
    public let uid: UInt32
    let executable: String
    let timeout: Double

    private struct Running: Sendable {
        var pid: pid_t
        var socket: Int32
        /// When the last operation ended (CLOCK_MONOTONIC seconds).
        var lastUse: Double
    }

    /// One helper process (or none yet), used by one request at a time.
    private final class Slot: Sendable {
        let running = Mutex<Running?>(nil)
    }

    private let slots: [Slot]
    /// Which slot a request waits for when every one is busy (in turn).
    private let turn = Atomic<Int>(0)

    public init(uid: UInt32, executable: String, timeout: Double, processes: Int = 1) {
        self.uid = uid
        self.executable = executable
        self.timeout = timeout
        slots = (0..<max(1, processes)).map { _ in Slot() }
    }

    deinit { stop() }

    /// Sends `request` and returns the reply and the descriptor that came with it (-1 if none;
    /// the caller owns it).
    /// With `anchor`, the request is done below it: its descriptor goes to the helper with it.
    public func perform(_ request: FileRequest, below anchor: DescriptorAnchor? = nil) throws -> (FileReply, Int32) {
        for slot in slots {
            let result = try slot.running.withLockIfAvailable { running in
                try perform(request, anchor, in: &running)
            }
            if let result { return result }
        }
        let slot = slots[turn.wrappingAdd(1, ordering: .relaxed).oldValue % slots.count]
        return try slot.running.withLock { running in try perform(request, anchor, in: &running) }
    }

    private func perform(
        _ request: FileRequest, _ anchor: DescriptorAnchor?, in running: inout Running?
    ) throws -> (FileReply, Int32) {
        if running == nil { running = try start() }
        guard let helper = running else { throw FileOperationError(.helper, "no file helper") }
        do {
            defer { running?.lastUse = Self.now() }
            return try exchange(request, anchor, with: helper)
        } catch {
            end(helper, kill: true)
            running = nil
            throw error
        }
    }

    /// Ends the helpers (each exits when its socket closes).
    public func stop() {
        for slot in slots {
            slot.running.withLock { running in
                if let helper = running { end(helper, kill: false) }
                running = nil
            }
        }
    }

    /// Ends each helper no operation used for `seconds` (a waiting operation goes first).
    public func stopIfIdle(for seconds: Double) {
        for slot in slots {
            slot.running.withLock { running in
                guard let helper = running, Self.now() - helper.lastUse >= seconds else { return }
                end(helper, kill: false)
                running = nil
            }
        }
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// The pids of the helpers that run now (for tests).
    public var pids: [pid_t] { slots.compactMap { slot in slot.running.withLock { $0?.pid } } }

    /// The first helper's pid, if one runs (for tests).
    public var pid: pid_t? { pids.first }

    private func start() throws -> Running {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw FileOperationError.system("cannot make a socket for the file helper")
        }
        let arguments = [executable, "--uid", String(uid)]
        var environment = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
        #if DEBUG
        // The crash tests arm the helper's crash point through the daemon's environment.
        if let armed = getenv(CrashPoint.environmentVariable) {
            environment.append("\(CrashPoint.environmentVariable)=\(String(cString: armed))")
        }
        #endif
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        let pid = uf_spawn(executable, argv, envp, pair[1])
        let code = errno
        close(pair[1])
        guard pid > 0 else {
            close(pair[0])
            throw FileOperationError(
                .helper, code: code, "cannot start the file helper \(executable): \(String(cString: strerror(code)))")
        }
        let helper = Running(pid: pid, socket: pair[0], lastUse: Self.now())
        var interval = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(helper.socket, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(helper.socket, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        do {
            let (reply, descriptor) = try receive(from: helper)
            if descriptor >= 0 { close(descriptor) }
            guard case .ready(let actual, _) = reply, actual == uid else {
                throw FileOperationError(.helper, "the file helper for uid \(uid) did not become uid \(uid)")
            }
        } catch {
            end(helper, kill: true)
            throw error
        }
        return helper
    }

    private func exchange(
        _ request: FileRequest, _ anchor: DescriptorAnchor?, with helper: Running
    ) throws -> (FileReply, Int32) {
        let bytes = anchor.map { request.encoded(below: $0) } ?? request.encoded()
        guard bytes.count <= FileHelperServer.maxDatagram else {
            throw FileOperationError(.other, code: ENAMETOOLONG, "the path is too long")
        }
        let sent = bytes.withUnsafeBytes { uf_send(helper.socket, $0.baseAddress, $0.count, anchor?.descriptor ?? -1) }
        guard sent == bytes.count else { throw failure(errno) }
        return try receive(from: helper)
    }

    private func receive(from helper: Running) throws -> (FileReply, Int32) {
        var buffer = [UInt8](repeating: 0, count: FileHelperServer.maxDatagram)
        var descriptor: Int32 = -1
        let n = buffer.withUnsafeMutableBytes { uf_receive(helper.socket, $0.baseAddress, $0.count, &descriptor) }
        guard n > 0 else { throw failure(n == 0 ? EPIPE : errno) }
        guard let reply = try? FileReply.decode(Array(buffer[0..<n])) else {
            if descriptor >= 0 { close(descriptor) }
            throw FileOperationError(.helper, "the file helper for uid \(uid) answered something malformed")
        }
        return (reply, descriptor)
    }

    private func failure(_ code: Int32) -> FileOperationError {
        if code == EAGAIN || code == EWOULDBLOCK {
            return FileOperationError(
                .helper, code: ETIMEDOUT,
                "the file helper for uid \(uid) did not answer within \(timeout) s (a hung file system?) and was stopped"
            )
        }
        return FileOperationError(
            .helper, code: code, "the file helper for uid \(uid) went away: \(String(cString: strerror(code)))")
    }

    /// Closes the socket (a live helper then exits), kills it if asked, and reaps it off the
    /// caller's thread (a process stuck in the kernel may take long to go).
    private func end(_ helper: Running, kill shouldKill: Bool) {
        close(helper.socket)
        if shouldKill { kill(helper.pid, SIGKILL) }
        let pid = helper.pid
        // A queue of its own (libdispatch's overcommitting pool): the global pool is as wide as
        // the cores and a reap may wait long.
        DispatchQueue(label: "org.example.Downloads.reap").async {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }
}
