#if canImport(Glibc)
import Glibc
#endif

/// The mode a caller's finished file gets: 0666 less the caller's umask, read from
/// `/proc/PID/status` of the calling process, as a file the caller created itself would have.
enum CallerUmask {
    /// 0644 when the umask cannot be read (no pid from the bus, or /proc hides it).
    static func fileMode(pid: UInt32?) -> UInt32 {
        guard let pid, let umask = umask(pid: pid) else { return 0o644 }
        return 0o666 & ~umask
    }

    /// The `Umask:` line of `/proc/PID/status`, read with one `read` into a stack buffer and parsed
    /// in place: it is read for every Start, and Foundation's file and string calls cost more than
    /// the rest of the call (see the many-small-files figures in Benchmarks/RESULTS.md).
    static func umask(pid: UInt32) -> UInt32? {
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { buffer -> UInt32? in
            var filled = 0
            while filled < buffer.count {
                let n = read(fd, buffer.baseAddress! + filled, buffer.count - filled)
                guard n > 0 else { break }
                filled += n
            }
            return parse(UnsafeBufferPointer(rebasing: buffer[0..<filled]))
        }
    }

    /// The octal value after `Umask:` at the start of a line.
    static func parse(_ status: UnsafeBufferPointer<UInt8>) -> UInt32? {
        let key = Array("Umask:".utf8)
        var index = 0
        while index + key.count <= status.count {
            if (index == 0 || status[index - 1] == UInt8(ascii: "\n"))
                && status[index..<index + key.count].elementsEqual(key)
            {
                var position = index + key.count
                while position < status.count,
                    status[position] == UInt8(ascii: " ") || status[position] == UInt8(ascii: "\t")
                {
                    position += 1
                }
                var value: UInt32 = 0
                var digits = 0
                while position < status.count, (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(status[position]),
                    digits < 6
                {
                    value = value * 8 + UInt32(status[position] - UInt8(ascii: "0"))
                    position += 1
                    digits += 1
                }
                return digits > 0 ? value & 0o777 : nil
            }
            index += 1
        }
        return nil
    }
}
