import CUserFiles
#if canImport(Glibc)
import Glibc
#endif

/// Where a downloaded file came from, as the freedesktop Common Extended Attributes say it
/// (`user.xdg.origin.url`, and `user.xdg.referrer.url` when the app named the page), the way
/// Chromium, `wget --xattr` and `curl --xattr` write them: file managers show them, and
/// `getfattr -d` reads them. Written on the partial file before the publishing rename, by the
/// process that publishes it (the user's own: the daemon for its user, the user's file helper
/// for the system daemon), so the file is never in place without them.
public struct OriginAttributes: Sendable, Equatable {
    public static let originName = "user.xdg.origin.url"
    public static let referrerName = "user.xdg.referrer.url"

    /// The URL, without credentials (the caller's to have taken out).
    public var url: String
    public var referrer: String?

    public init(url: String, referrer: String? = nil) {
        self.url = url
        self.referrer = referrer
    }

    /// Each attribute's name and value, in the order they are written.
    public var attributes: [(name: String, value: String)] {
        [(Self.originName, url)] + (referrer.map { [(Self.referrerName, $0)] } ?? [])
    }

    /// Writes them on the open file `fd` (opened for reading is enough: the kernel checks the
    /// inode's permission, not the descriptor's mode): whether they were, and the first error.
    func write(to fd: Int32) -> AttributeWrite {
        for (name, value) in attributes {
            let result = Array(value.utf8).withUnsafeBytes { uf_set_attribute(fd, name, $0.baseAddress, $0.count) }
            if result != 0 { return .refused(errno, attribute: name) }
        }
        return .written
    }
}
