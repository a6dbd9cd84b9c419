import Foundation

/// The mode a caller's finished file gets: 0666 less the caller's umask, read from
/// `/proc/PID/status` of the calling process, as a file the caller created itself would have.
enum CallerUmask {
    /// 0644 when the umask cannot be read (no pid from the bus, or /proc hides it).
    static func fileMode(pid: UInt32?) -> UInt32 {
        guard let pid, let umask = umask(pid: pid) else { return 0o644 }
        return 0o666 & ~umask
    }

    static func umask(pid: UInt32) -> UInt32? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Umask:") {
            return UInt32(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8).map { $0 & 0o777 }
        }
        return nil
    }
}
