import Dispatch
#if canImport(Glibc)
import DownloadModel
import Glibc
#endif

/// The path's delay now, as the time a TCP handshake with the first hop (the server, or the
/// proxy) takes: its SYN waits in the same queues as the transfer's packets, so a queue that
/// another flow fills shows here at once, without privileges (no ICMP). The connection is reset
/// at once (SO_LINGER 0: no TIME_WAIT left behind, nothing sent to the server's application).
enum DelayProbe {
    /// Seconds the handshake with `address`:`port` took, or nil when it failed or took longer
    /// than `timeout` seconds. Runs on a thread of its own (connect and poll block: `BlockingWork`).
    static func connectTime(address: String, port: Int, timeout: Double) async -> Double? {
        await BlockingWork.run { measure(address: address, port: port, timeout: timeout) }
    }

    private static func measure(address: String, port: Int, timeout: Double) -> Double? {
        var storage = sockaddr_storage()
        var length: socklen_t
        var v4 = in_addr(), v6 = in6_addr()
        let family: Int32
        if inet_pton(AF_INET, address, &v4) == 1 {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET)
                sin.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                sin.pointee.sin_addr = v4
            }
        } else if inet_pton(AF_INET6, address.trimmingBrackets, &v6) == 1 {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                sin6.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                sin6.pointee.sin6_addr = v6
            }
        } else {
            return nil
        }
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(fd)
        }
        let clock = ContinuousClock()
        let started = clock.now
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        if result != 0 {
            guard errno == EINPROGRESS else { return nil }
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            // A signal (a child process ending) interrupts the wait: it goes on for the time
            // left. (Taken as a timeout, it read as a full link and a background task gave way.)
            let deadline = started + .milliseconds(Int64(max(1, timeout * 1000)))
            var ready: Int32 = -1
            repeat {
                let left = deadline - clock.now
                let milliseconds = max(
                    0, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
                ready = poll(&entry, 1, Int32(milliseconds))
            } while ready < 0 && errno == EINTR && clock.now < deadline
            guard ready == 1 else { return nil }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0, error == 0 else { return nil }
        }
        let elapsed = clock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}

private extension String {
    var trimmingBrackets: String {
        hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self
    }
}
