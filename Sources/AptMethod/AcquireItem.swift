/// One `600 URI Acquire`: what apt wants fetched and into which file, with what it knows of it.
public struct AcquireItem: Sendable, Hashable {
    /// The URI as apt gave it (`downloads+https://…`): every answer names it so.
    public var uri: String
    /// The URL the service fetches (`https://…`).
    public var url: String
    /// The file apt reads the result from (written in place).
    public var filename: String
    /// `Expected-SHA256`, lower-case hex, when apt knows it (packages and indexes of a signed
    /// Release; never the Release files themselves).
    public var expectedSHA256: String?
    /// `Last-Modified` of the file apt has (an RFC 1123 date): asked with `If-Modified-Since`.
    public var lastModified: String?
    /// `Maximum-Size`: more is a failure (apt's defence against an endless InRelease).
    public var maximumSize: Int64?
    /// `Expected-Checksum-FileSize`: the file's length as the index gives it (packages, and
    /// indexes named by a Release), the task's `expected_size`.
    public var expectedSize: UInt64?
    public var isIndexFile: Bool

    /// nil when the message lacks a URI or a file name, or the URI is no `downloads` URI.
    public init?(_ message: AptMessage) {
        guard message.code == 600, let uri = message["URI"], let filename = message["Filename"], !filename.isEmpty,
            let url = Self.url(of: uri)
        else { return nil }
        self.uri = uri
        self.url = url
        self.filename = filename
        expectedSHA256 = message["Expected-SHA256"].flatMap { hex in
            hex.count == 64 && hex.allSatisfy(\.isHexDigit) ? hex.lowercased() : nil
        }
        lastModified = message["Last-Modified"].flatMap { $0.isEmpty ? nil : $0 }
        maximumSize = message["Maximum-Size"].flatMap { Int64($0) }
        expectedSize = message["Expected-Checksum-FileSize"].flatMap { UInt64($0) }.flatMap {
            $0 <= UInt64(Int64.max) ? $0 : nil
        }
        isIndexFile = message["Index-File"]?.lowercased() == "true"
    }

    /// The URL behind a `downloads+http://`, `downloads+https://` or `downloads://` URI (the last
    /// is https), or a plain `http://` or `https://` one (apt sends those when the method is named
    /// for a scheme, `Dir::Bin::Methods::https "downloads";`); nil for anything else.
    public static func url(of uri: String) -> String? {
        for (prefix, scheme) in [
            ("downloads+https://", "https://"), ("downloads+http://", "http://"),
            ("downloads://", "https://"), ("https://", "https://"), ("http://", "http://"),
        ]
        where uri.lowercased().hasPrefix(prefix) {
            let rest = uri.dropFirst(prefix.count)
            return rest.isEmpty ? nil : scheme + rest
        }
        return nil
    }
}
