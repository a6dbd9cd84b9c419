import DownloadModel
import Foundation
import Metalink
import ProxyRules

/// What a download takes from a Metalink document's file entry, in one place for a document
/// given at `Start` (option `metalink`) and one the daemon follows (a URL answered with
/// `application/metalink4+xml`).
extension MetalinkDocument {
    /// The media type of a Metalink v4 document (RFC 5854).
    public static let mediaType = "application/metalink4+xml"
}

extension MetalinkDocument.File {
    /// Its http(s) URLs with a host, by priority; when `base` is given (the document came from
    /// that URL), only those a redirect from it may go to (never from https to http).
    public func downloadURLs(from base: String? = nil) -> [String] {
        var seen = Set<String>()
        return sources.map(\.url).filter { text in
            guard let url = URL(string: text), Source(url) != nil, !URLCharacters.containSpaceOrControl(text)
            else { return false }
            if let base, (try? RedirectRules.checkedRedirect(from: base, to: text)) == nil { return false }
            return seen.insert(text).inserted
        }
    }

    /// Its `name` as the file to create in a destination directory: the last component, made safe
    /// as a server's name is (`HTTPHeaderRules.sanitize`); nil when nothing usable is left.
    public var fileName: String? {
        HTTPHeaderRules.sanitize(String(name.split(separator: "/").last ?? ""))
    }

    /// Its strongest hash of a type known here (`Checksum.Algorithm.strongestFirst`).
    public var strongestChecksum: Checksum? {
        let given = hashes.compactMap { hash in
            Checksum.Algorithm(ianaName: hash.type).flatMap { try? Checksum($0, hex: hash.hex) }
        }
        return Checksum.Algorithm.strongestFirst.lazy.compactMap { algorithm in
            given.first { $0.algorithm == algorithm }
        }.first
    }

    /// Its piece hashes when their type is known here (else nil: the whole-file hash still
    /// applies); pieces that cannot describe its `<size>` are refused.
    public func pieceHashes() throws(Checksum.Invalid) -> PieceHashes? {
        guard let given = pieces, let algorithm = Checksum.Algorithm(ianaName: given.type) else { return nil }
        let pieces: PieceHashes
        do throws(Checksum.Invalid) {
            pieces = try PieceHashes(algorithm, length: given.length, hashes: given.hashes)
        } catch {
            throw Checksum.Invalid(message: "the Metalink document's pieces: \(error.message)")
        }
        if let size, !pieces.fits(size) {
            throw Checksum.Invalid(
                message:
                    "the Metalink document gives \(pieces.count) pieces of \(pieces.length) bytes for a file of \(size) bytes"
            )
        }
        return pieces
    }
}
