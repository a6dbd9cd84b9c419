import Crypto
import DownloadModel

/// A digest computed while a file is written: bytes are fed in file order from `position`; a
/// write elsewhere is left for `finish` to read back from the file. One stream from the start
/// of the file is hashed entirely in flight; a resumed or segmented download reads back only
/// what was not written in order during this run. Not thread-safe: the writer's drain owns it.
struct RunningDigest {
    private enum Hasher {
        case sha256(SHA256), sha384(SHA384), sha512(SHA512), sha1(Insecure.SHA1), md5(Insecure.MD5)

        init(_ algorithm: Checksum.Algorithm) {
            switch algorithm {
            case .sha256: self = .sha256(SHA256())
            case .sha384: self = .sha384(SHA384())
            case .sha512: self = .sha512(SHA512())
            case .sha1: self = .sha1(Insecure.SHA1())
            case .md5: self = .md5(Insecure.MD5())
            }
        }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            switch self {
            case .sha256(var h): h.update(bufferPointer: bytes); self = .sha256(h)
            case .sha384(var h): h.update(bufferPointer: bytes); self = .sha384(h)
            case .sha512(var h): h.update(bufferPointer: bytes); self = .sha512(h)
            case .sha1(var h): h.update(bufferPointer: bytes); self = .sha1(h)
            case .md5(var h): h.update(bufferPointer: bytes); self = .md5(h)
            }
        }

        func finalize() -> [UInt8] {
            switch self {
            case .sha256(let h): return Array(h.finalize())
            case .sha384(let h): return Array(h.finalize())
            case .sha512(let h): return Array(h.finalize())
            case .sha1(let h): return Array(h.finalize())
            case .md5(let h): return Array(h.finalize())
            }
        }
    }

    let algorithm: Checksum.Algorithm
    private var hasher: Hasher
    /// Bytes of the file hashed so far, from `origin`.
    private(set) var position: Int64 = 0
    private var origin: Int64 = 0
    /// Bytes that had to be read back from the file (`finish`): the in-flight hashing's misses.
    private(set) var readBack: Int64 = 0

    /// `start`: the offset its first byte has (a piece's digest starts inside the file).
    init(_ algorithm: Checksum.Algorithm, from start: Int64 = 0) {
        self.algorithm = algorithm
        hasher = Hasher(algorithm)
        position = start
        origin = start
    }

    /// `bytes` were written at `offset`: hashed when they continue what was hashed; a rewrite of
    /// bytes already hashed (the file is being written again) starts over from the file.
    mutating func wrote(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        let end = offset + Int64(bytes.count)
        if offset == position {
            hasher.update(bytes)
            position = end
        } else if offset < position {
            reset()
        }
    }

    /// The file was cut to `length`: what was hashed beyond it is no longer the file's.
    mutating func truncated(to length: Int64) {
        if length < position { reset() }
    }

    mutating func reset() {
        hasher = Hasher(algorithm)
        position = origin
    }

    /// The digest of the file's first `length` bytes, hex: reads what was not hashed in flight
    /// with `read(offset, into)` (which returns the bytes read, 0 at the end of the file).
    mutating func finish(length: Int64, read: (Int64, UnsafeMutableRawBufferPointer) throws -> Int) throws -> String {
        if position > length { reset() }
        if position < length {
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while position < length {
                let want = Int(min(Int64(buffer.count), length - position))
                let n = try buffer.withUnsafeMutableBytes {
                    try read(position, UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]))
                }
                guard n > 0 else { throw DownloadError.file("the file is shorter than the download") }
                buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                position += Int64(n)
                readBack += Int64(n)
            }
        }
        return Hex.string(hasher.finalize())
    }
}
