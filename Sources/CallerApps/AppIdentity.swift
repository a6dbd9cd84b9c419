import CUserFiles
#if canImport(Glibc)
import Glibc
#endif

/// Which app a process belongs to, found as xdg-desktop-portal finds it (`xdp-app-info-flatpak.c`,
/// `xdp-app-info-snap.c`): from the kernel, never from anything the process says. `""` is a host
/// (unsandboxed) process; a Flatpak app is its app id (`[Application] name` of
/// `/.flatpak-info` in the process's root, which Flatpak mounts read-only into every sandbox);
/// a Snap is `snap.NAME`. Anything unclear fails closed: an error, never "host".
public enum AppIdentity {
    /// Larger than any real `.flatpak-info` (a few KiB); more is refused, not read.
    public static let maximumInfoSize = 64 << 10

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// The system's error, when one said why.
        public let code: Int32
        init(_ description: String, code: Int32 = 0) {
            self.description = description
            self.code = code
        }

        /// The kernel said no (EACCES, EPERM): this process may not look, not that there is nothing.
        public var isDenied: Bool { code == EACCES || code == EPERM }
    }

    /// Opens `/.flatpak-info` in the root of a process (nil: there is none): by default here,
    /// with this process's rights; a root daemon without `CAP_SYS_PTRACE` passes one that opens
    /// it as the process's own user (its file helper), as xdg-desktop-portal, running as the
    /// user, does.
    public typealias InfoOpener = @Sendable (_ pid: UInt32) throws -> Int32?

    /// Opens it here (`UserFileOperations.openAppInfo`'s way).
    public static let openHere: InfoOpener = { pid in
        let root = open("/proc/\(pid)/root", uf_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            let code = errno
            throw Failure("the root of process \(pid) cannot be opened: \(String(cString: strerror(code)))", code: code)
        }
        defer { close(root) }
        let fd = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            throw Failure(
                "/.flatpak-info of process \(pid) cannot be opened: \(String(cString: strerror(code)))", code: code)
        }
        return fd
    }

    /// The app of process `pid`, which the bus says belongs to `uid`. `securityLabel` is the
    /// bus's `LinuxSecurityLabel` of the connection (AppArmor: `snap.NAME.APP (enforce)`).
    public static func app(
        pid: UInt32, uid: UInt32, securityLabel: String? = nil, openInfo: InfoOpener = openHere
    ) throws -> String {
        guard pid > 0 else { throw Failure("the bus did not say which process is calling") }
        // Held while we look, so a pid that is reused meanwhile is noticed at the end.
        let pidfd = uf_pidfd_open(pid_t(pid))
        guard pidfd >= 0 else {
            throw Failure("process \(pid) cannot be looked at: \(String(cString: strerror(errno)))")
        }
        defer { close(pidfd) }
        let app: String
        if let info = try flatpakInfo(pid: pid, uid: uid, open: openInfo) {
            guard let id = flatpakAppID(fromInfo: info) else {
                throw Failure("process \(pid) runs in a Flatpak sandbox whose /.flatpak-info names no app")
            }
            app = id
        } else if let label = securityLabel, let snap = snapName(fromLabel: label) {
            app = "snap." + snap
        } else if let cgroup = contents("/proc/\(pid)/cgroup"), let snap = snapName(fromCgroup: cgroup) {
            app = "snap." + snap
        } else {
            app = ""
        }
        guard uf_pidfd_alive(pidfd) != 0 else { throw Failure("process \(pid) ended while it was looked at") }
        return app
    }

    /// The text of `/.flatpak-info` in the process's root, or nil when there is none (a host
    /// process). Opened below the process's root without following a link, non-blocking (a FIFO
    /// would hang a read), and only trusted as a regular file of the caller's own uid (a file
    /// only root may read, mounted there by the caller, is refused, not read) of at most
    /// `maximumInfoSize` bytes.
    static func flatpakInfo(pid: UInt32, uid: UInt32, open: InfoOpener = openHere) throws -> String? {
        let opened: Int32?
        do {
            opened = try open(pid)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("/.flatpak-info of process \(pid) cannot be opened: \(error)")
        }
        guard let fd = opened else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw Failure("/.flatpak-info of process \(pid) is not a regular file")
        }
        guard info.st_uid == uid else { throw Failure("/.flatpak-info of process \(pid) does not belong to its user") }
        guard info.st_size <= maximumInfoSize else {
            throw Failure("/.flatpak-info of process \(pid) is larger than \(maximumInfoSize) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: maximumInfoSize + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw Failure("/.flatpak-info of process \(pid) cannot be read") }
            if n == 0 { break }
            count += n
        }
        guard count <= maximumInfoSize else {
            throw Failure("/.flatpak-info of process \(pid) is larger than \(maximumInfoSize) bytes")
        }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }

    /// The service's own name: no app may be it or below it (its completion `bus_name` and
    /// `desktop_entry` are derived from its id).
    public static let reservedID = "org.example.Downloads"

    /// `name` of the `[Application]` group of a `.flatpak-info`, read as GKeyFile (Flatpak, the
    /// portal) reads it: a key given twice counts as its last value, a group given twice is one
    /// group; if it is an app id and not the service's own name (or below it).
    public static func flatpakAppID(fromInfo text: String) -> String? {
        var group = ""
        var name: String?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.trimmingCharacters(in: " \t\r")
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard group == "Application", let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: " \t")
            guard key == "name" else { continue }
            name = line[line.index(after: equals)...].trimmingCharacters(in: " \t")
        }
        guard let name, isAppID(name), name != reservedID, !name.hasPrefix(reservedID + ".") else { return nil }
        return name
    }

    /// A snap's name from `/proc/PID/cgroup`: a unit `snap.NAME.APP…` (`.scope` or `.service`)
    /// on any line's path, as snapd places every app process.
    public static func snapName(fromCgroup text: String) -> String? {
        for line in text.split(separator: "\n") {
            guard let path = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last else {
                continue
            }
            for component in path.split(separator: "/")
            where component.hasPrefix("snap.")
                && (component.hasSuffix(".scope") || component.hasSuffix(".service"))
            {
                let parts = component.split(separator: ".", omittingEmptySubsequences: false)
                if parts.count >= 3, isSnapName(parts[1]) { return String(parts[1]) }
            }
        }
        return nil
    }

    /// A snap's name from an AppArmor label `snap.NAME.APP (enforce)` (or `snap.NAME.hook.X`).
    public static func snapName(fromLabel label: String) -> String? {
        let profile = label.split(separator: " ").first ?? ""
        let parts = profile.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0] == "snap", isSnapName(parts[1]) else { return nil }
        return String(parts[1])
    }

    /// A D-Bus-name-shaped app id (what Flatpak accepts): 2+ dot-separated elements of
    /// `[A-Za-z0-9_-]`, none starting with a digit, at most 255 bytes.
    public static func isAppID(_ id: String) -> Bool {
        guard id.utf8.count <= 255 else { return false }
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
                return false
            }
            return element.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-")
            }
        }
    }

    /// Snap names: lower-case letters, digits and dashes (snapd's `ValidateName`).
    static func isSnapName(_ name: Substring) -> Bool {
        !name.isEmpty && name.utf8.count <= 40
            && name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "-")
            }
    }

    private static func contents(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 16 << 10)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        return n > 0 ? String(decoding: bytes[0..<n], as: UTF8.self) : nil
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var view = Substring(self)
        while let first = view.first, set.contains(first) { view = view.dropFirst() }
        while let last = view.last, set.contains(last) { view = view.dropLast() }
        return String(view)
    }
}
