import DownloadModel
import Foundation
import ProxyRules
import TerminalOutput
import ShownText

/// What a redirect may do, as pure functions (tested without I/O).
public enum RedirectRules {
    /// Headers that carry the caller's credentials. They go only to the origin the caller named:
    /// a redirect to another scheme, host or port drops them (as curl does since CVE-2022-27776).
    public static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// Each hop: only http/https, never from https down to http, always with a host.
    public static func checkedRedirect(from current: String, to location: String) throws -> String {
        guard let base = URL(string: current), let next = URL(string: location, relativeTo: base)?.absoluteURL,
            let scheme = next.scheme?.lowercased()
        else {
            throw DownloadError.invalidResponse(
                "redirect to an invalid location “\(DisplayText.quoted(location, limit: 80))”")
        }
        guard Source.isSourceScheme(scheme) else {
            throw DownloadError.insecureRedirect(
                "redirect to a “\(DisplayText.quoted(scheme, limit: 20))” URL is not followed")
        }
        if base.scheme?.lowercased() == "https" && scheme == "http" {
            throw DownloadError.insecureRedirect("redirect from https to http is not followed")
        }
        guard let host = next.host, !host.isEmpty else {
            throw DownloadError.invalidResponse("redirect to a URL without a host")
        }
        return next.absoluteString
    }

    /// Longest URL a server may send the task to (as the service takes from a caller).
    public static let maxURLBytes = 8 * 1024

    /// Whether a URL a server named (a Metalink document's) may become the task's, by the rules
    /// a caller's URL is held to at Start: http(s) with a host, no user name or password (they
    /// would be shown and stored, never sent), no space or control character, at most 8 KiB.
    public static func acceptableAsTaskURL(_ text: String) -> Bool {
        guard text.utf8.count <= maxURLBytes, !URLCharacters.containSpaceOrControl(text), let url = URL(string: text),
            Source(url) != nil
        else { return false }
        return url.user == nil && url.password == nil
    }

    /// The method a redirect with `status` turns a request sent with `method` into, when it turns
    /// it into another (then without its body); nil: the same method and body go again. As curl:
    /// 303 is fetched with GET; 301 and 302 turn only a POST into a GET; 307 and 308 send the
    /// same method and body again (RFC 9110 §15.4).
    public static func methodAfter(_ status: Int, _ method: String) -> String? {
        guard method != "GET" else { return nil }
        return status == 303 || ((status == 301 || status == 302) && method == "POST") ? "GET" : nil
    }

    /// Scheme, host (case-insensitive) and port (the scheme's default when absent) are equal.
    public static func sameOrigin(_ a: String, _ b: String) -> Bool {
        guard let left = Source(a)?.origin, let right = Source(b)?.origin else { return false }
        return left == right
    }
}
