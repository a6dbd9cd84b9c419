import Foundation

/// Where a transfer's bytes come from or go to: today an http or https URL with a host (a task's
/// URL, a mirror, a Metalink document's URL; a LAN peer next round). The one place that says
/// which URLs are sources and what their origin is: `Start`'s checks, redirects, the mirrors a
/// head or a document names, and whether credentials may go somewhere all ask it.
public struct Source: Sendable, Hashable {
    /// The schemes a source may have.
    public static let schemes: Set<String> = ["http", "https"]

    public let url: URL
    /// Lower-cased.
    public let scheme: String
    /// Lower-cased.
    public let host: String
    /// The URL's port, or its scheme's default.
    public let port: Int

    /// nil unless `url` is absolute, http or https, and has a host.
    public init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), Self.schemes.contains(scheme), let host = url.host, !host.isEmpty
        else { return nil }
        self.url = url
        self.scheme = scheme
        self.host = host.lowercased()
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    public init?(_ text: String) {
        guard let url = URL(string: text) else { return nil }
        self.init(url)
    }

    /// Whether a scheme (any case) is one a source may have.
    public static func isSourceScheme(_ scheme: String) -> Bool { schemes.contains(scheme.lowercased()) }

    public var isSecure: Bool { scheme == "https" }

    /// Scheme, host and port: what credentials are bound to (RFC 6454's origin).
    public var origin: Origin { Origin(scheme: scheme, host: host, port: port) }

    public struct Origin: Sendable, Hashable {
        public var scheme: String
        public var host: String
        public var port: Int
    }
}
