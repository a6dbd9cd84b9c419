import Crypto

/// The expected digest of a whole download (the `checksum` option, `ALGO:HEX`), as mirrors and
/// release pages publish them and aria2's `--checksum=TYPE=DIGEST` takes them. `sha1` and `md5`
/// are accepted for legacy mirrors: they check integrity, not authenticity (a server that chose
/// the bytes can choose a collision).
public struct Checksum: Sendable, Hashable, CustomStringConvertible {
    public enum Algorithm: String, Sendable, Hashable, CaseIterable {
        case sha256, sha384, sha512, sha1, md5

        /// Hexadecimal digits of a digest.
        public var hexLength: Int {
            switch self {
            case .md5: return 32
            case .sha1: return 40
            case .sha256: return 64
            case .sha384: return 96
            case .sha512: return 128
            }
        }

        /// The strongest first: which of several published digests to check.
        public static let strongestFirst: [Algorithm] = [.sha512, .sha384, .sha256, .sha1, .md5]

        /// The algorithm of an IANA hash name as Metalink (`sha-256`), `Digest` (`SHA-256`, `SHA`
        /// for SHA-1) and `Repr-Digest` (`sha-256`) write it; nil for one not taken.
        public init?(ianaName name: String) {
            switch name.lowercased() {
            case "sha-512": self = .sha512
            case "sha-384": self = .sha384
            case "sha-256": self = .sha256
            case "sha-1", "sha": self = .sha1
            case "md5": self = .md5
            default: return nil
            }
        }

        /// The name people read (`SHA-256`, `MD5`).
        public var displayName: String {
            switch self {
            case .md5: return "MD5"
            case .sha1: return "SHA-1"
            case .sha256: return "SHA-256"
            case .sha384: return "SHA-384"
            case .sha512: return "SHA-512"
            }
        }
    }

    /// Why a checksum text was refused (the service's `InvalidArgument` message).
    public struct Invalid: Error, Sendable, Hashable {
        public let message: String

        public init(message: String) { self.message = message }
    }

    public let algorithm: Algorithm
    /// Lowercase hexadecimal, `algorithm.hexLength` digits.
    public let hex: String

    public init(_ algorithm: Algorithm, hex: String) throws(Invalid) {
        let lower = hex.lowercased()
        guard lower.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw Invalid(message: "a \(algorithm.rawValue) checksum must be hexadecimal digits")
        }
        guard lower.utf8.count % 2 == 0 else {
            throw Invalid(
                message: "a checksum has an even number of hexadecimal digits (two per byte), got \(lower.utf8.count)")
        }
        guard lower.utf8.count == algorithm.hexLength else {
            throw Invalid(
                message:
                    "a \(algorithm.rawValue) checksum is \(algorithm.hexLength) hexadecimal digits, got \(lower.utf8.count)"
            )
        }
        self.algorithm = algorithm
        self.hex = lower
    }

    /// `ALGO:HEX` (the algorithm in any case).
    public static func parse(_ text: String) throws(Invalid) -> Checksum {
        let known = Algorithm.allCases.map(\.rawValue).joined(separator: ", ")
        guard let colon = text.firstIndex(of: ":") else {
            throw Invalid(message: "checksum must be ALGO:HEX with ALGO one of \(known)")
        }
        let name = text[..<colon].lowercased()
        guard let algorithm = Algorithm(rawValue: name) else {
            throw Invalid(message: "unknown checksum algorithm '\(name.prefix(32))' (known: \(known))")
        }
        return try Checksum(algorithm, hex: String(text[text.index(after: colon)...]))
    }

    /// `ALGO:HEX`, as the option is written.
    public var text: String { "\(algorithm.rawValue):\(hex)" }
    public var description: String { text }
}
