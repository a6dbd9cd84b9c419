/// What a request to the share server asks for, read as Passim reads it
/// (`passim_server_handler_cb`): `GET /<name>?sha256=<64 hex>`, the name only a label (the file
/// is found by its hash alone, so no path of a request ever reaches the file system), and the
/// answers Passim gives to what it refuses.
public enum PassimRequest: Equatable, Sendable {
    /// The file whose SHA-256 (lowercase) is `sha256`; `name` as the path gave it, decoded.
    case file(sha256: String, name: String)
    /// Refused with this status and reason, before any file is looked at.
    case refused(status: Int, reason: String)

    /// Reads a request line's method and target (`/name?query`).
    public static func parse(method: String, target: String) -> PassimRequest {
        // Passim answers 403 to anything but GET; HEAD is taken too (curl -I, a peer's probe).
        guard method == "GET" || method == "HEAD" else { return .refused(status: 403, reason: "only GET") }
        let (path, query) = split(target)
        guard path.hasPrefix("/"), path != "/" else {
            // Passim shows its index to loopback only; this server has none.
            return .refused(status: 403, reason: "no index")
        }
        guard let query else { return .refused(status: 400, reason: "sha256= argument required") }
        var hash: Substring?
        for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == "sha256" else { continue }
            guard hash == nil else { return .refused(status: 400, reason: "duplicate sha256= argument") }
            hash = parts[1]
        }
        guard let hash else { return .refused(status: 400, reason: "sha256= argument required") }
        guard isSHA256(hash) else { return .refused(status: 406, reason: "sha256 hash is malformed") }
        let last = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? ""
        return .file(sha256: hash.lowercased(), name: percentDecoded(last) ?? last)
    }

    /// 64 hexadecimal digits, either case (Passim's `passim_is_valid_sha256`).
    public static func isSHA256(_ text: some StringProtocol) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { $0.isHexDigit }
    }

    private static func split(_ target: String) -> (path: String, query: String?) {
        guard let mark = target.firstIndex(of: "?") else { return (target, nil) }
        return (String(target[..<mark]), String(target[target.index(after: mark)...]))
    }

    /// `%XX` decoded; nil when an escape is broken or the bytes are not UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(\.hexValue), let low = iterator.next().flatMap(\.hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool { hexValue != nil }

    fileprivate var hexValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
