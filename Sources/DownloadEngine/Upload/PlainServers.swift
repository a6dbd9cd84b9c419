import NIOConcurrencyHelpers

/// The places whose answer to `OPTIONS` said they speak neither resumable protocol, for a while:
/// a thousand uploads into one directory of a plain server ask once, not a thousand times. The
/// key is the URL's scheme, authority and directory (its path up to the last `/`), so a tus
/// endpoint and the files beside it are apart. Only "neither" is kept: a server that speaks a
/// protocol is asked each time (one request, against what a resumable upload saves).
struct PlainServers: Sendable {
    static let shared = PlainServers()
    /// How long an answer holds.
    static let lifetime: Duration = .seconds(600)
    /// At most this many places are kept (the oldest answer goes first).
    static let capacity = 1024

    private let answers = NIOLockedValueBox([String: ContinuousClock.Instant]())

    /// `scheme://authority/directory/` of `url`, nil when it has no host.
    static func key(_ url: String) -> String? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<pathStart]
        guard !authority.isEmpty else { return nil }
        var path = rest[pathStart...].prefix { $0 != "?" && $0 != "#" }
        if let slash = path.lastIndex(of: "/") { path = path[...slash] } else { path = "/" }
        return url[..<schemeEnd.upperBound].lowercased() + authority.lowercased() + path
    }

    func isPlain(_ url: String) -> Bool {
        guard let key = Self.key(url) else { return false }
        return answers.withLockedValue { answers in
            guard let until = answers[key] else { return false }
            if until < .now { answers[key] = nil }
            return until >= .now
        }
    }

    func rememberPlain(_ url: String) {
        guard let key = Self.key(url) else { return }
        answers.withLockedValue { answers in
            if answers.count >= Self.capacity, let oldest = answers.min(by: { $0.value < $1.value })?.key { answers[oldest] = nil }
            answers[key] = .now + Self.lifetime
        }
    }
}
