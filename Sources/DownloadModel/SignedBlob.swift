import Crypto

/// The framing of the service's resume data (a task's and a group's): a header line naming the
/// format and its version, a JSON line, and `hmac-sha256:<hex>` over the first two, under a key
/// only the daemon knows. Readable with `cat`; a forged, truncated or altered blob is refused.
enum SignedBlob {
    /// The blob of `header` and `json`.
    static func encode(header: String, json: [UInt8], key: SymmetricKey) -> [UInt8] {
        let text = Array(header.utf8) + [10] + json
        let mac = HMAC<SHA256>.authenticationCode(for: text, using: key)
        return text + Array("\nhmac-sha256:".utf8) + Array(Hex.string(Array(mac)).utf8) + [10]
    }

    /// The JSON line of a blob whose HMAC is this key's. `what` names the blob in the errors
    /// ("the resume data"); `checkHeader` throws for a header line it does not take (before the
    /// HMAC is looked at); every failure is `InvalidResumeData` with the reason.
    static func decode(
        _ blob: [UInt8], key: SymmetricKey, maximumSize: Int, what: String, checkHeader: ([UInt8]) throws -> Void
    ) throws -> [UInt8] {
        guard !blob.isEmpty else { throw DownloadError.invalidResumeData("\(what) is empty") }
        guard blob.count <= maximumSize else {
            throw DownloadError.invalidResumeData("\(what) is larger than \(maximumSize) bytes")
        }
        var lines = blob.split(separator: 10, omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        guard lines.count == 3 else { throw DownloadError.invalidResumeData("\(what) is truncated or malformed") }
        try checkHeader(Array(lines[0]))
        let prefix = Array("hmac-sha256:".utf8)
        let macLine = Array(lines[2])
        guard macLine.starts(with: prefix), let mac = Hex.bytes(macLine.dropFirst(prefix.count)), mac.count == 32 else {
            throw DownloadError.invalidResumeData("\(what) has no valid HMAC line")
        }
        let text = Array(lines[0]) + [10] + Array(lines[1])
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: text, using: key) else {
            throw DownloadError.invalidResumeData("\(what) was not made by this service or was altered")
        }
        return Array(lines[1])
    }
}
