import Crypto
import DownloadModel
import Foundation
import NIOHTTP1

/// tus 1.0.0 (tus.io/protocols/resumable-upload) on the wire: `Tus-Resumable` on every request
/// but `OPTIONS`; the server's `OPTIONS` names its versions, extensions, largest upload and
/// checksum algorithms; a creation says `Upload-Length` and `Upload-Metadata`; an append is
/// `application/offset+octet-stream` at `Upload-Offset`, with `Upload-Checksum` of its bytes
/// where the server offers the checksum extension.
enum TusRules {
    static let version = "1.0.0"
    static let appendType = "application/offset+octet-stream"
    /// The most bytes a `PATCH` carries, and the most a creation carries (`creation-with-upload`).
    static let chunkSize: Int64 = 4 << 20
    static let smallestPart: Int64 = 1 << 20

    /// A `PATCH`'s bytes for a file of `size`: what a cut costs with a server that keeps nothing of
    /// an unfinished `PATCH` (as the Python server the tests run), and what a checksum is computed
    /// over before its bytes are sent. A 400th of the file, 1 to 4 MiB: three cuts cost at most
    /// 0.75 % of a file of 400 MiB or more, and a part is a few round trips' worth on a fast link.
    static func partSize(for size: Int64) -> Int64 {
        min(chunkSize, max(smallestPart, size / 400))
    }
    /// The checksum algorithms we can compute, preferred first.
    static let checksums = ["sha256", "sha1"]

    /// What the server's answer to `OPTIONS` says; nil when it does not speak tus 1.0.0.
    static func capabilities(_ headers: HTTPHeaders) -> ResumableUpload? {
        guard let versions = headers.first(name: "tus-version") ?? headers.first(name: "tus-resumable") else {
            return nil
        }
        guard list(versions).contains(version) else { return nil }
        let extensions = Set(list(headers.first(name: "tus-extension") ?? ""))
        let offered = Set(list(headers.first(name: "tus-checksum-algorithm") ?? "").map { $0.lowercased() })
        return ResumableUpload(
            kind: .tus, version: 1,
            checksum: extensions.contains("checksum") ? checksums.first(where: offered.contains) : nil,
            creationWithUpload: extensions.contains("creation-with-upload"),
            termination: extensions.contains("termination"),
            maxSize: headers.first(name: "tus-max-size").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        )
    }

    static func mark(_ headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: "Tus-Resumable", value: version)
    }

    /// `Upload-Metadata`: the file's name and type, and the task's string metadata whose keys tus
    /// allows (no spaces or commas), each value base64.
    static func metadata(filename: String, contentType: String?, metadata: [String: MetadataValue]) -> String {
        var pairs = ["filename \(Data(filename.utf8).base64EncodedString())"]
        if let contentType { pairs.append("filetype \(Data(contentType.utf8).base64EncodedString())") }
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            guard case .string(let text) = value, !key.isEmpty, key != "filename", key != "filetype",
                key.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "," && $0.value < 0x7f })
            else { continue }
            pairs.append("\(key) \(Data(text.utf8).base64EncodedString())")
        }
        return pairs.joined(separator: ",")
    }

    /// `Upload-Checksum` of `bytes`: the algorithm and the base64 digest.
    static func checksum(_ algorithm: String, of bytes: some Sequence<UInt8>) -> String {
        let digest: [UInt8]
        switch algorithm {
        case "sha1": digest = Array(Insecure.SHA1.hash(data: Array(bytes)))
        default: digest = Array(SHA256.hash(data: Array(bytes)))
        }
        return "\(algorithm) \(Data(digest).base64EncodedString())"
    }

    static func offset(_ headers: HTTPHeaders) -> Int64? { IETFUploadRules.offset(headers) }

    /// `Upload-Expires` (an HTTP date), as seconds since 1970.
    static func expires(_ headers: HTTPHeaders) -> Double? {
        headers.first(name: "upload-expires").flatMap(HTTPDate.date).map(\.timeIntervalSince1970)
    }

    private static func list(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
