import CUserFiles
import CrashPoints
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

/// The helper side: becomes one user (uid, that user's gid and groups, `no_new_privs`, no
/// capabilities), then does `FileRequest`s with those credentials until the daemon closes the
/// socket. Single-threaded; a request is answered before the next is read.
public enum FileHelperServer {
    /// Largest datagram either side sends (two paths of at most a few KiB, and some integers).
    static let maxDatagram = 64 << 10

    /// Runs the helper on `socket` for `uid`; returns the process's exit status.
    public static func run(uid: UInt32, socket: Int32) -> Int32 {
        uf_close_from(socket + 1)
        umask(0o077)
        if let failure = become(uid) {
            printError("downloads-file-helper: cannot become uid \(uid): \(failure)")
            return 1
        }
        guard send(.ready(uid: getuid(), gid: getgid()), on: socket) else { return 1 }
        let operations = UserFileOperations()
        var buffer = [UInt8](repeating: 0, count: maxDatagram)
        while true {
            var passed: Int32 = -1
            let n = buffer.withUnsafeMutableBytes { uf_receive(socket, $0.baseAddress, $0.count, &passed) }
            if n <= 0, passed >= 0 { close(passed) }
            if n == 0 { return 0 }
            guard n > 0 else { return errno == EMSGSIZE ? 2 : 0 }
            let reply: FileReply
            var descriptor: Int32 = -1
            // An anchored request owns the descriptor that came with it; any other is closed.
            let decoded = try? FileRequest.decode(Array(buffer[0..<n]), passed: passed)
            if decoded?.1 == nil, passed >= 0 { close(passed) }
            if let (request, anchor) = decoded {
                (reply, descriptor) = request.perform(with: anchor.map { UserFileOperations(anchor: $0) } ?? operations)
                if case .opened(_, created: true) = reply { CrashPoint.helperCreated.reached() }
            } else {
                reply = .failed(FileOperationError(.other, code: EINVAL, "malformed request"))
            }
            let sent = send(reply, on: socket, descriptor: descriptor)
            if descriptor >= 0 { close(descriptor) }
            guard sent else { return 0 }
        }
    }

    /// One line on standard error (the daemon's journal).
    public static func printError(_ line: String) {
        Output.write(line + "\n", to: 2)
    }

    private static func send(_ reply: FileReply, on socket: Int32, descriptor: Int32 = -1) -> Bool {
        let bytes = reply.encoded()
        return bytes.withUnsafeBytes { uf_send(socket, $0.baseAddress, $0.count, descriptor) } == bytes.count
    }

    /// Takes on `uid`'s credentials. As root: the user's primary gid and supplementary groups
    /// from the user database (a uid without an entry gets gid = uid and no other group), then
    /// uid. Already `uid`: only `no_new_privs`. Anyone else: refused. Returns why it failed.
    static func become(_ uid: UInt32) -> String? {
        if getuid() == uid && geteuid() == uid {
            return uf_set_no_new_privs() == 0 ? nil : String(cString: strerror(errno))
        }
        guard geteuid() == 0 else { return "only root can start a helper for another user" }
        var gid = gid_t(uid)
        var groups: [gid_t] = []
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var storage = [CChar](repeating: 0, count: 16 << 10)
        if getpwuid_r(uid_t(uid), &entry, &storage, storage.count, &result) == 0, result != nil,
            let name = entry.pw_name
        {
            gid = entry.pw_gid
            var count: Int32 = 64
            groups = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(name, gid, &groups, &count) < 0 {
                groups = [gid_t](repeating: 0, count: Int(count))
                if getgrouplist(name, gid, &groups, &count) < 0 { return "cannot list the groups of uid \(uid)" }
            }
            groups = Array(groups.prefix(Int(count)))
        }
        if groups.isEmpty { groups = [gid] }
        let status = groups.withUnsafeBufferPointer { uf_drop_privileges(uid_t(uid), gid, $0.baseAddress, $0.count) }
        return status == 0 ? nil : String(cString: strerror(errno))
    }
}
