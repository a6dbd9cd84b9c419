/// The hashes of a file's pieces (a Metalink document's `<pieces>`): the file cut into pieces of
/// `length` bytes (the last one shorter), each with the digest of its bytes. A segmented download
/// checks every piece as it completes and fetches a piece that differs again (`PieceProgress`);
/// the whole file is still checked against `checksum` before it is published.
///
/// Digests are kept as bytes, one after another (a 4 GiB file in 256 KiB pieces has 16,384 SHA-1
/// digests: 320 KiB, not 16,384 strings).
public struct PieceHashes: Sendable, Hashable {
    public let algorithm: Checksum.Algorithm
    /// Bytes per piece (the last piece holds what is left).
    public let length: Int64
    private let digests: [UInt8]

    /// The most pieces one task may have (a 1 MiB Metalink document holds fewer).
    public static let maxCount = 1 << 17
    /// The smallest piece taken (aria2 and MirrorBrain publish 256 KiB and more).
    public static let minimumLength: Int64 = 16 << 10

    /// `hashes`: one hex digest per piece, in file order.
    public init(_ algorithm: Checksum.Algorithm, length: Int64, hashes: [String]) throws(Checksum.Invalid) {
        guard length >= PieceHashes.minimumLength, length <= 1 << 30 else {
            throw Checksum.Invalid(
                message: "a piece length is between \(PieceHashes.minimumLength) bytes and 1 GiB, got \(length)")
        }
        guard !hashes.isEmpty, hashes.count <= PieceHashes.maxCount else {
            throw Checksum.Invalid(message: "1 to \(PieceHashes.maxCount) piece hashes, got \(hashes.count)")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hashes.count * algorithm.hexLength / 2)
        for hash in hashes {
            let checked = try Checksum(algorithm, hex: hash.filter { !$0.isWhitespace })
            bytes += Hex.bytes(checked.hex.utf8) ?? []
        }
        self.algorithm = algorithm
        self.length = length
        digests = bytes
    }

    public var count: Int { digests.count / digestSize }
    private var digestSize: Int { algorithm.hexLength / 2 }

    /// Whether these pieces describe a file of `fileLength` bytes (as many pieces as it takes).
    public func fits(_ fileLength: Int64) -> Bool {
        fileLength > 0 && (fileLength + length - 1) / length == Int64(count)
    }

    /// The bytes of piece `index` in a file of `fileLength` bytes.
    public func range(of index: Int, fileLength: Int64) -> ByteRange {
        let start = Int64(index) * length
        return ByteRange(start: start, end: min(fileLength, start + length))
    }

    /// The digest of piece `index`, lowercase hex.
    public func hex(of index: Int) -> String {
        Hex.string(digests[index * digestSize..<(index + 1) * digestSize])
    }

    /// Every digest, hex, one after another (the stored form).
    public var hexDigests: String { (0..<count).map(hex(of:)).joined() }

    /// The stored form read back: `hex` is the digests one after another.
    public init(_ algorithm: Checksum.Algorithm, length: Int64, concatenated hex: String) throws(Checksum.Invalid) {
        let size = algorithm.hexLength
        let utf8 = Array(hex.utf8)
        guard !utf8.isEmpty, utf8.count % size == 0 else {
            throw Checksum.Invalid(message: "piece hashes are \(size) hexadecimal digits each")
        }
        let hashes = stride(from: 0, to: utf8.count, by: size).map {
            String(decoding: utf8[$0..<$0 + size], as: UTF8.self)
        }
        try self.init(algorithm, length: length, hashes: hashes)
    }
}
