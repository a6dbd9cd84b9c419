import Foundation

/// Loopback ports for servers a test starts (127.0.0.1 or ::1).
public enum FreePort {
    /// A port the kernel had free a moment ago (bound and closed again).
    public static func pick(ipv6: Bool = false) throws -> Int {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var port: UInt16 = 0
        let bound = withLoopback(ipv6: ipv6, port: 0) { address, length in
            guard bind(fd, address, length) == 0 else { return false }
            var storage = sockaddr_storage()
            var size = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let named = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
            }
            guard named == 0 else { return false }
            port = withUnsafePointer(to: &storage) { pointer in
                ipv6
                    ? pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        UInt16(bigEndian: $0.pointee.sin6_port)
                    }
                    : pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        UInt16(bigEndian: $0.pointee.sin_port)
                    }
            }
            return true
        }
        guard bound, port != 0 else { throw POSIXError(.init(rawValue: errno) ?? .EADDRINUSE) }
        return Int(port)
    }

    /// Waits until `process` (a server just started) accepts connections on the loopback `port`;
    /// false when it exited first or `seconds` passed.
    public static func waitUntilAccepting(_ port: Int, by process: ChildProcess?, seconds: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !accepts(port: port) {
            guard Date() < deadline, process?.hasExited == false else { return false }
            usleep(20_000)
        }
        return true
    }

    /// Whether something accepts TCP connections on the loopback `port`.
    public static func accepts(port: Int, ipv6: Bool = false) -> Bool {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withLoopback(ipv6: ipv6, port: port) { connect(fd, $0, $1) == 0 }
    }

    private static func withLoopback(
        ipv6: Bool, port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            address.sin6_addr = in6addr_loopback
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
