import Foundation

/// Which of this machine's network interfaces are a local network to share on: Ethernet and
/// Wi-Fi (`ARPHRD_ETHER` in `/sys/class/net/IF/type`), not a VPN's `tun`/`tap` (`tun_flags`),
/// WireGuard or another point-to-point link (`ARPHRD_NONE`, PPP, raw IP), nor a mobile broadband
/// modem (`DEVTYPE=wwan`). The share server's advert goes only on those, and a connection that
/// came in on an address of any other interface is closed before TLS (`ShareServer`'s `accepts`).
/// The loopback is this machine itself and is taken.
public enum LANInterfaces {
    static let ether = "1"
    static let loopback = "772"

    /// Whether the interface `name` is a LAN (or the loopback), read from `sysfs`.
    public static func isLAN(_ name: String, sysfs: String = "/sys/class/net") -> Bool {
        guard !name.isEmpty, !name.contains("/"), let type = read("\(sysfs)/\(name)/type") else { return false }
        if type == loopback { return true }
        guard type == ether else { return false }
        if access("\(sysfs)/\(name)/tun_flags", F_OK) == 0 { return false }
        let uevent = read("\(sysfs)/\(name)/uevent") ?? ""
        return !uevent.split(separator: "\n").contains("DEVTYPE=wwan")
    }

    /// The indexes of the LAN interfaces that are up now (the loopback left out: Avahi does not
    /// publish on it).
    public static func indexes(sysfs: String = "/sys/class/net") -> [Int32] {
        var result: Set<Int32> = []
        for (name, flags) in interfaces() where flags & UInt32(IFF_UP) != 0 && flags & UInt32(IFF_LOOPBACK) == 0 {
            guard isLAN(name, sysfs: sysfs) else { continue }
            let index = if_nametoindex(name)
            if index > 0 { result.insert(Int32(index)) }
        }
        return result.sorted()
    }

    /// The interface that holds `address` (one of this machine's), nil when none does.
    public static func interface(holding address: String) -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        let wanted = address.hasPrefix("::ffff:") && address.contains(".") ? String(address.dropFirst(7)) : address
        var entry: UnsafeMutablePointer<ifaddrs>? = first
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            guard let socket = current.pointee.ifa_addr, let text = numeric(socket) else { continue }
            if text == wanted || text.split(separator: "%").first.map(String.init) == wanted {
                return String(cString: current.pointee.ifa_name)
            }
        }
        return nil
    }

    /// Whether a connection to `localAddress` (the address a client reached) came in on a LAN.
    public static func acceptsConnection(to localAddress: String) -> Bool {
        interface(holding: localAddress).map { isLAN($0) } ?? false
    }

    private static func interfaces() -> [(String, UInt32)] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var result: [(String, UInt32)] = []
        var entry: UnsafeMutablePointer<ifaddrs>? = first
        while let current = entry {
            result.append((String(cString: current.pointee.ifa_name), current.pointee.ifa_flags))
            entry = current.pointee.ifa_next
        }
        return result
    }

    private static func numeric(_ socket: UnsafeMutablePointer<sockaddr>) -> String? {
        let family = Int32(socket.pointee.sa_family)
        guard family == AF_INET || family == AF_INET6 else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        guard getnameinfo(socket, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else {
            return nil
        }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 4096)
        var text = ""
        while fgets(&buffer, Int32(buffer.count), file) != nil {
            text += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
