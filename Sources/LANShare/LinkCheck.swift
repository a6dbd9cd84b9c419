#if canImport(Glibc)
import Glibc
#endif

/// Whether an address a peer advertised lies on the link it was found on: an IPv4 address inside
/// one of the networks of that interface (its address and netmask, from `getifaddrs`). A peer
/// that advertises another subnet's address (or the loopback) from a LAN is not taken: it would
/// send the service's request somewhere the link does not reach.
public enum LinkCheck {
    public static func isOnLink(_ address: String, interface: Int32) -> Bool {
        guard let target = ipv4(address) else { return false }
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return false }
        defer { freeifaddrs(list) }
        var entry: UnsafeMutablePointer<ifaddrs>? = first
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            guard let name = current.pointee.ifa_name, Int32(if_nametoindex(name)) == interface,
                let addr = current.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET),
                let mask = current.pointee.ifa_netmask
            else { continue }
            let local = addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
            let netmask = mask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
            if local & netmask == target & netmask { return true }
        }
        return false
    }

    /// An IPv4 address in network order, nil for anything else.
    static func ipv4(_ text: String) -> in_addr_t? {
        var address = in_addr()
        return inet_pton(AF_INET, text, &address) == 1 ? address.s_addr : nil
    }

    /// 127.0.0.0/8.
    public static func isLoopback(_ text: String) -> Bool {
        guard let address = ipv4(text) else { return text == "::1" }
        return UInt32(bigEndian: address) >> 24 == 127
    }
}
