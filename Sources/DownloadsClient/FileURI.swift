/// A `file://` URI of an absolute path (RFC 8089), as the desktop's D-Bus interfaces take
/// them (`FileManager1.ShowItems`, job views' `destUrl`): every byte but the unreserved ones
/// and `/` percent-encoded, so a space, `#`, `?` or `%` in a name stays part of the path.
public enum FileURI {
    public static func of(_ path: String) -> String {
        var uri = "file://"
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                uri.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                uri.unicodeScalars.append("%")
                uri.unicodeScalars.append(hex[Int(byte >> 4)])
                uri.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return uri
    }
}
