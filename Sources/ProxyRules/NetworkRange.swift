#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 network in CIDR notation (`169.254.0.0/16`, `fe80::/10`), and whether an
/// address lies in it. IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) count as their IPv4 address.
/// An address that reaches this host when connected to (`0.0.0.0/8`, `::`, and their mapped
/// forms: Linux connects them to the loopback) lies in every network that holds a loopback
/// address, so denying `127.0.0.0/8` or `::1/128` denies them too.
public struct NetworkRange: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes, the bits past `prefix` cleared.
    let bytes: [UInt8]
    let prefix: Int

    /// Parses `address/prefix` (a bare address is one host); nil if it is not one.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = Self.parse(String(parts[0])) else { return nil }
        let bits = address.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value), !parts[1].hasPrefix("+") else { return nil }
            prefix = value
        }
        self.prefix = prefix
        self.bytes = Self.masked(address, prefix)
    }

    public static let linkLocal = [NetworkRange("169.254.0.0/16")!, NetworkRange("fe80::/10")!]

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(text)/\(prefix)"
    }

    /// Whether `address` (text, as getaddrinfo or a URL gives it) is in this network.
    public func contains(_ address: String) -> Bool {
        guard var candidate = Self.parse(address) else { return false }
        if holds(candidate) { return true }
        if candidate.count == 16, candidate[0..<10].allSatisfy({ $0 == 0 }), candidate[10] == 0xff,
            candidate[11] == 0xff
        {
            candidate = Array(candidate[12...])
            if holds(candidate) { return true }
        }
        // This host by another name: in here when a loopback address is.
        let thisHost = candidate.count == 4 ? candidate[0] == 0 : candidate.allSatisfy { $0 == 0 }
        return thisHost && (holds([127, 0, 0, 1]) || holds(Array(repeating: 0, count: 15) + [1]))
    }

    private func holds(_ candidate: [UInt8]) -> Bool {
        candidate.count == bytes.count && Self.masked(candidate, prefix) == bytes
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address (brackets allowed), or nil: not an address.
    public static func parse(_ text: String) -> [UInt8]? {
        var text = text
        if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        var v4 = [UInt8](repeating: 0, count: 4)
        if inet_pton(AF_INET, text, &v4) == 1 { return v4 }
        var v6 = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET6, text, &v6) == 1 { return v6 }
        return nil
    }

    private static func masked(_ address: [UInt8], _ prefix: Int) -> [UInt8] {
        address.enumerated().map { index, byte in
            let keep = max(0, min(8, prefix - index * 8))
            return keep == 8 ? byte : byte & UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
    }
}
