import DownloadModel
import NIOHTTP1

/// The IETF resumable-upload draft (draft-ietf-httpbis-resumable-upload) as its interop versions
/// 3, 5 and 6 put it on the wire, the versions swift-nio-extras' `NIOResumableUpload` speaks:
/// every request says `Upload-Draft-Interop-Version`; version 3 marks a request or response
/// `Upload-Incomplete: ?1`, versions 5 and 6 `Upload-Complete: ?0` (their inverse); version 6
/// sends an append as `application/partial-upload`. Structured-field items (RFC 8941): `?1`/`?0`
/// booleans, integers, and `Upload-Limit`'s dictionary.
enum IETFUploadRules {
    static let versionHeader = "Upload-Draft-Interop-Version"

    /// What to probe with (`OPTIONS`, `protocol` auto): the newest version spoken.
    static var newest: Int { UploadProtocol.ietfVersions.last ?? 6 }

    /// The headers that say whether this request's body ends the upload.
    static func mark(_ headers: inout HTTPHeaders, version: Int, complete: Bool) {
        headers.replaceOrAdd(name: versionHeader, value: String(version))
        if version >= 5 {
            headers.replaceOrAdd(name: "Upload-Complete", value: complete ? "?1" : "?0")
        } else {
            headers.replaceOrAdd(name: "Upload-Incomplete", value: complete ? "?0" : "?1")
        }
    }

    /// Headers of the careful creation: no body yet, the length said up front.
    static func creation(_ headers: inout HTTPHeaders, version: Int, length: Int64) {
        mark(&headers, version: version, complete: false)
        headers.replaceOrAdd(name: "Upload-Length", value: String(length))
    }

    /// Headers of an append of the rest, from `offset`, that ends the upload.
    static func append(_ headers: inout HTTPHeaders, version: Int, offset: Int64) {
        mark(&headers, version: version, complete: true)
        headers.replaceOrAdd(name: "Upload-Offset", value: String(offset))
        if version >= 6 { headers.replaceOrAdd(name: "Content-Type", value: "application/partial-upload") }
    }

    /// `Upload-Offset` of a response.
    static func offset(_ headers: HTTPHeaders) -> Int64? {
        headers.first(name: "upload-offset").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.flatMap {
            $0 >= 0 ? $0 : nil
        }
    }

    /// Whether the response says the server holds the whole upload: `Upload-Complete: ?1` or
    /// `Upload-Incomplete: ?0`, whichever version the server answered with (some servers mix
    /// them up on a final response); nil when it says neither.
    static func complete(_ headers: HTTPHeaders) -> Bool? {
        if let value = headers.first(name: "upload-complete") { return boolean(value) }
        if let value = headers.first(name: "upload-incomplete") { return boolean(value).map { !$0 } }
        return nil
    }

    /// Whether a response shows the server speaks the draft: its version header, or the
    /// `Upload-Limit` it answers an `OPTIONS` with.
    static func spoken(_ headers: HTTPHeaders) -> Bool {
        headers.contains(name: versionHeader) || headers.contains(name: "upload-limit")
    }

    /// `Upload-Limit`: `max-size` (bytes) and `max-age` (seconds the resource is kept).
    static func limit(_ headers: HTTPHeaders) -> (maxSize: Int64?, maxAge: Int64?) {
        guard let value = headers.first(name: "upload-limit") else { return (nil, nil) }
        var maxSize: Int64?, maxAge: Int64?
        for member in value.split(separator: ",") {
            let pair = member.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let number = Int64(pair[1].split(separator: ";").first ?? ""), number >= 0 else {
                continue
            }
            switch pair[0] {
            case "max-size": maxSize = number
            case "max-age": maxAge = number
            default: break
            }
        }
        return (maxSize, maxAge)
    }

    private static func boolean(_ value: String) -> Bool? {
        switch value.trimmingCharacters(in: .whitespaces) {
        case "?1": return true
        case "?0": return false
        default: return nil
        }
    }
}
