import Crypto
import Foundation

/// Deterministic test content and its SHA-256, for comparing bytes on disk with the source.
public enum TestData {
    /// `size` pseudo-random bytes (xorshift), the same for the same seed.
    public static func content(_ size: Int, seed: UInt32 = 1) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        var x = seed &* 2_654_435_761 | 1
        for i in 0..<size {
            x ^= x << 13
            x ^= x >> 17
            x ^= x << 5
            bytes[i] = UInt8(truncatingIfNeeded: x)
        }
        return bytes
    }

    public static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// The digest of `bytes` by a `checksum` algorithm's name (sha256, sha384, sha512, sha1, md5), hex.
    public static func digest(_ algorithm: String, _ bytes: [UInt8]) -> String {
        func hex<D: Digest>(_ digest: D) -> String { digest.map { String(format: "%02x", $0) }.joined() }
        switch algorithm {
        case "sha384": return hex(SHA384.hash(data: bytes))
        case "sha512": return hex(SHA512.hash(data: bytes))
        case "sha1": return hex(Insecure.SHA1.hash(data: bytes))
        case "md5": return hex(Insecure.MD5.hash(data: bytes))
        default: return sha256(bytes)
        }
    }

    /// SHA-256 of a file, or nil when it cannot be read.
    public static func sha256(ofFile path: String) -> String? {
        FileManager.default.contents(atPath: path).map { sha256(Array($0)) }
    }
}
