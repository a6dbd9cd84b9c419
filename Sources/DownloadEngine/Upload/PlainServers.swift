import DownloadModel
import NIOConcurrencyHelpers
import ProxyRules

/// The upload URLs whose answer to `OPTIONS` said they speak neither resumable protocol, for a
/// while: the same upload sent again (a retry, a `Resume`, a restart) does not ask again. What one
/// party learns serves only that party: the key is the owner (uid and app), the route (the task's
/// proxy, or the daemon's) and the exact URL (its fragment left out), so one user's answer, or
/// one proxy's, never decides how another user's upload goes; each owner keeps at most
/// `capacity` answers (its oldest go first), so nobody can push out another's. Only "neither" is
/// kept: a server that speaks a protocol is asked each time (one request, against what a
/// resumable upload saves). An upload that was sent plain because of a kept answer and is
/// refused (4xx) forgets it and asks once more (`UploadRun`).
struct PlainServers: Sendable {
    static let shared = PlainServers()
    /// How long an answer holds.
    static let lifetime: Duration = .seconds(600)
    /// At most this many answers an owner (the oldest answer goes first).
    static let capacity = 1024

    struct Owner: Hashable, Sendable {
        var uid: UInt32
        var app: String
    }

    struct Key: Hashable, Sendable {
        var owner: Owner
        var proxy: ProxySetting?
        var url: String
    }

    private let answers = NIOLockedValueBox([Owner: [Key: ContinuousClock.Instant]]())

    /// The key of `url` for `record`'s owner and route; nil when the URL has no host.
    static func key(_ url: String, for record: DownloadTaskRecord) -> Key? {
        guard let schemeEnd = url.range(of: "://"), !url[schemeEnd.upperBound...].isEmpty else { return nil }
        let exact = url.firstIndex(of: "#").map { String(url[..<$0]) } ?? url
        return Key(owner: Owner(uid: record.owner, app: record.app), proxy: record.options.proxy, url: exact)
    }

    func isPlain(_ key: Key) -> Bool {
        answers.withLockedValue { answers in
            guard let until = answers[key.owner]?[key] else { return false }
            if until < .now { answers[key.owner]?[key] = nil }
            return until >= .now
        }
    }

    func rememberPlain(_ key: Key) {
        answers.withLockedValue { answers in
            var kept = answers[key.owner, default: [:]]
            kept = kept.filter { $0.value >= .now }
            if kept.count >= Self.capacity, let oldest = kept.min(by: { $0.value < $1.value })?.key {
                kept[oldest] = nil
            }
            kept[key] = .now + Self.lifetime
            answers[key.owner] = kept
        }
    }

    func forget(_ key: Key) {
        answers.withLockedValue { answers in
            answers[key.owner]?[key] = nil
            if answers[key.owner]?.isEmpty == true { answers[key.owner] = nil }
        }
    }
}
