/// A machine of the local network that offers a file by its SHA-256, as Avahi resolved it.
public struct LANPeer: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 address (IPv6 link-local ones need their interface; IPv4 is preferred, as Passim does).
    public var address: String
    public var port: Int
    /// The interface index it was found on (the link it is taken on).
    public var interface: Int32
    /// The Avahi service name and host name.
    public var name: String
    public var hostName: String
    /// TXT `ranges=1`: a peer of this service, which takes byte ranges like a mirror. Without it, a
    /// Passim peer: one GET per hash an hour to each client, Range counted as a GET.
    public var takesRanges: Bool

    public init(address: String, port: Int, interface: Int32, name: String, hostName: String, takesRanges: Bool) {
        self.address = address
        self.port = port
        self.interface = interface
        self.name = name
        self.hostName = hostName
        self.takesRanges = takesRanges
    }

    /// How `GetMetrics`' `bytes_by_source` names it.
    public var description: String { "peer:\(address)" }

    /// Passim's URL of the file on this peer.
    public func url(sha256: String, name: String) -> String {
        let label = name.isEmpty ? "file" : name.addingPercentEncodingForPath()
        return "https://\(address):\(port)/\(label)?sha256=\(sha256)"
    }
}

extension String {
    /// Unreserved characters kept, every other byte `%XX` (a path segment of a URL).
    fileprivate func addingPercentEncodingForPath() -> String {
        var out = ""
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}
