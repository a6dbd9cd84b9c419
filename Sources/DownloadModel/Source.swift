import Foundation

/// Where a transfer's bytes come from or go to: today an http or https URL with a host (a task's
/// URL, a mirror, a Metalink document's URL; a LAN peer next round). The one place that says
/// which URLs are sources, what their origin is and which server their connections go to:
/// `Start`'s checks, redirects, the mirrors a head or a document names, whether credentials may
/// go somewhere, a download's per-server connection limit (`MirrorSet`) and whose validator a
/// segmented download trusts all ask it.
public struct Source: Sendable, Hashable {
    /// The schemes a source may have.
    public static let schemes: Set<String> = ["http", "https"]

    /// What a source is to its transfer: the task's own URL and where its redirects lead
    /// (`origin`: the server the caller named), another server of the same file (`mirror`: the
    /// option `mirrors`, a Metalink document or head), or a machine of the local network that has
    /// the file by its hash (`peer`, the LAN peers issue: any certificate, the hash checks the
    /// bytes, no credentials ever).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case origin, mirror, peer
    }

    public let kind: Kind
    public let url: URL
    /// Lower-cased.
    public let scheme: String
    /// Lower-cased.
    public let host: String
    /// The URL's port, or its scheme's default.
    public let port: Int

    /// nil unless `url` is absolute, http or https, and has a host.
    public init?(_ url: URL, kind: Kind = .origin) {
        guard let scheme = url.scheme?.lowercased(), Self.schemes.contains(scheme), let host = url.host, !host.isEmpty
        else { return nil }
        self.kind = kind
        self.url = url
        self.scheme = scheme
        self.host = host.lowercased()
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    public init?(_ text: String, kind: Kind = .origin) {
        guard let url = URL(string: text) else { return nil }
        self.init(url, kind: kind)
    }

    /// Whether a scheme (any case) is one a source may have.
    public static func isSourceScheme(_ scheme: String) -> Bool { schemes.contains(scheme.lowercased()) }

    public var isSecure: Bool { scheme == "https" }

    /// Scheme, host and port: what credentials are bound to (RFC 6454's origin).
    public var origin: Origin { Origin(scheme: scheme, host: host, port: port) }

    /// The URL without its `user:password@` (the service takes them out at `Start`; a redirect's
    /// `Location` may carry some).
    public var withoutCredentials: String {
        guard url.user != nil || url.password != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url.absoluteString }
        components.user = nil
        components.password = nil
        return components.string ?? url.absoluteString
    }

    /// The URL without its credentials, query and fragment: where a file came from as its origin
    /// attributes record it for every user who can read the file (a signed URL's query,
    /// `X-Amz-Signature=…&token=…`, is a bearer token).
    public var withoutCredentialsOrQuery: String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return server }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        return components.string ?? server
    }

    /// `scheme://host:port`, lower case, the scheme's port when the URL has none: the server a
    /// source's connections go to. A download's connections to one server are counted against
    /// its per-server limit (`MirrorSet`), and a validator is trusted only from the server it
    /// came from (a segmented download's probe).
    public var server: String { "\(scheme)://\(host):\(port)" }

    /// The server of `url`, or `url` itself when it is not a source (which then shares a server
    /// with nothing else).
    public static func server(of url: String) -> String { Source(url)?.server ?? url }

    public struct Origin: Sendable, Hashable {
        public var scheme: String
        public var host: String
        public var port: Int
    }
}
