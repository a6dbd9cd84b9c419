import Foundation
import ProxyRules
import ShownText

/// What a client may set per download (the `a{sv}` options of Start, already validated).
public struct DownloadOptions: Sendable, Hashable {
    public enum Priority: String, Sendable, Hashable, CaseIterable, Comparable {
        case low, normal, high

        public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rank < rhs.rank }
        var rank: Int { self == .low ? 0 : self == .normal ? 1 : 2 }
    }

    /// Extra request headers (checked for CR/LF and forbidden names).
    public var headers: [String: String] = [:]
    /// `sha256//BASE64` of the SubjectPublicKeyInfo the server's certificate must have (curl's
    /// `--pinnedpubkey`), checked besides the system's store; empty: no pin.
    public var pinnedPublicKeys: [String] = []
    /// With `pinnedPublicKeys`: a self-signed server whose key is pinned is trusted instead of
    /// checked against the system's store and the host name.
    public var trustPinnedOnly = false
    /// The certificate and key a TLS server that asks for one is given (`client_certificate`).
    /// A secret: never in the options' written form (`Codable`); the store and resume data seal it.
    public var clientCertificate: ClientCertificate?
    /// The expected digest of the whole file (`checksum`, or the older `sha256`).
    public var checksum: Checksum?
    public var priority: Priority = .normal
    /// 0 = unlimited.
    public var maxBytesPerSecond: UInt64 = 0
    /// Ranged connections at once, at most (1–16), when the server allows ranges and the length is
    /// known; the scheduler grants fewer when its connection places are short and more as they free up (`Scheduler`).
    public var connections = 1
    /// Replace an existing destination file.
    public var overwrite = false
    /// false: wait while the network is metered.
    public var allowMetered = true
    /// true: wait while the machine runs on battery (UPower's `OnBattery`), and stop the transfer
    /// (checkpointed) when it unplugs.
    public var requiresACPower = false
    /// Seconds; nil = the engine default.
    public var connectTimeout: Double?
    public var stallTimeout: Double?
    /// Whole-transfer limit in seconds; nil = none.
    public var resourceTimeout: Double?
    /// The calling app's desktop file id, for the desktop agent (checked by the service).
    public var desktopEntry: String?
    /// A transfer slower than `lowSpeedLimit` bytes a second for `lowSpeedTime` seconds ends as
    /// `Timeout` (and is retried); nil = the engine's defaults, a limit of 0 = no check.
    public var lowSpeedLimit: UInt64?
    public var lowSpeedTime: Double?
    /// The caller's proxy for this task (`.direct`: none); nil = the daemon's environment
    /// (`ProxyEnvironment`). Its credentials are secrets: stored, sealed in resume data, never
    /// shown or logged (`ProxySetting.description` leaves them out).
    public var proxy: ProxySetting?
    /// A background transfer: it uses only the bandwidth nobody else is using (`BackgroundPacer`).
    public var background = false
    /// What the app calls the download, and a line about it (BITS' display name and
    /// description, URLSession's `taskDescription`): shown by the desktop agent and downloadsctl.
    public var title: String?
    public var taskDescription: String?
    /// The app's own data (Ubuntu's download manager `metadata`), matched by `FindTasks`.
    public var metadata: [String: MetadataValue] = [:]
    /// More URLs of the same file (checked http(s) URLs): a segmented download spreads its ranges
    /// over the URL and these (`MirrorSet`).
    public var mirrors: [String] = []
    /// The Metalink document's URL this task's URL and mirrors came from (a URL answered with
    /// `application/metalink4+xml`): set once it was followed, so no second document is.
    public var metalinkURL: String?
    /// The URL the caller's credentials (`Authorization`, `Cookie`, `Proxy-Authorization`, a
    /// URL's `user:password@`) were given for, once the task's URL is another one: recorded when
    /// a followed Metalink document makes its file the task's URL (Start's URL then), and when
    /// the caller sets a URL (`SetURL`, `ResumeWithData`'s `url`: that one). Every request of the
    /// task, for its whole life (runs, retries, resumes, restarts, segments, mirrors), carries
    /// them only to this URL's origin. nil: the task's URL (or, for a task stored before it was
    /// recorded that followed a document, the document's URL).
    public var credentialsOrigin: String?
    /// The file's length a Metalink document promised (`<size>`), or the caller (`expected_size`):
    /// a server whose length differs fails the task (`LengthPromise`).
    public var promisedLength: Int64?
    /// The file's piece hashes (from a Metalink document): each piece is checked as it
    /// completes and fetched again when it differs (`PieceProgress`).
    public var pieces: PieceHashes?
    /// Take mirrors (`Link: rel=duplicate`) and the file's digest (`Digest`, `Repr-Digest`) from
    /// the first response's head (Metalink/HTTP, RFC 6249; `MetalinkHeaders`).
    public var useMetalinkHeaders = true
    /// Not before this time (Unix seconds, URLSession's `earliestBeginDate`): the task stays
    /// queued (`WaitingFor` `begin-time`) until then.
    public var earliestBegin: UInt64?
    /// The page the download was found on (`referrer`, a checked http(s) URL without
    /// credentials): sent as `Referer` (unless the app's headers carry one) and written on the
    /// finished file as `user.xdg.referrer.url`.
    public var referrer: String?
    /// false: the finished file carries no `user.xdg.origin.url` / `user.xdg.referrer.url` (an
    /// app that must not record where a file came from; `OriginAttributes`).
    public var originAttributes = true
    /// On `Finished`, the file is added to its owner's recently used files
    /// (`recently-used.xbel`), by a process of that user (`RecentFiles`).
    public var addToRecent = false
    /// On `Finished`, the file is offered to the local network by its SHA-256 on these terms
    /// (`share`; LANShare); nil: not offered.
    public var share: ShareTerms?
    /// The file may also come from machines of the local network that have it by its SHA-256
    /// (`lan_peers`): the service browses for them while it fetches the URL (DownloadEngine's
    /// `PeerFinder`); a task without a whole-file sha-256 fetches from its URL alone.
    public var lanPeers = false
    /// A conditional download (`if_modified_since`, Unix seconds; `if_none_match`, entity tags):
    /// its first request from the start of the file carries `If-Modified-Since`/`If-None-Match`,
    /// and a 304 finishes the task with the destination untouched (`ResponseStatus` 304).
    public var ifModifiedSince: Int64?
    public var ifNoneMatch: String?

    public init() {}

    /// Whether a request from the file's start asks the server for the file only if it changed.
    public var isConditional: Bool { ifModifiedSince != nil || ifNoneMatch != nil }

    /// These options as a request to a LAN peer goes with them: none of the caller's headers
    /// (a token may be one), no referrer.
    public var withoutCallersHeaders: DownloadOptions {
        var options = self
        options.headers = [:]
        options.referrer = nil
        // A peer serves a hash, not a version of the URL.
        options.ifModifiedSince = nil
        options.ifNoneMatch = nil
        return options
    }

    /// Whether the task may begin at `now` (Unix seconds).
    public func mayBegin(at now: UInt64) -> Bool { earliestBegin.map { $0 <= now } ?? true }

    /// Most mirrors a task may have.
    public static let maxMirrors = 32

    /// Connections for a download from the URL and `mirrors` mirrors when the caller chose none:
    /// two to each source, at most `maxConnections`.
    public static func connections(mirrors: Int) -> Int {
        min(maxConnections, 2 * (1 + mirrors))
    }

    /// `existing` mirrors, then those of `urls` that are neither `primary` nor there yet, at most `maxMirrors`.
    public static func mirrors(_ existing: [String], adding urls: [String], besides primary: String) -> [String] {
        var result = existing
        for url in urls where url != primary && !result.contains(url) { result.append(url) }
        return Array(result.prefix(maxMirrors))
    }

    /// Longest `title` and `description`, in bytes.
    public static let maxTextBytes = 1024
    /// Longest `metadata`, serialised as stored, in bytes.
    public static let maxMetadataBytes = 4096
    /// Longest metadata key, in bytes.
    public static let maxMetadataKeyBytes = 255

    /// The options that may change while a task exists (ResumeWithData's options): nil leaves
    /// the current value.
    public struct Change: Sendable, Hashable {
        public var priority: Priority?
        public var maxBytesPerSecond: UInt64?
        public var allowMetered: Bool?
        public var proxy: ProxySetting?
        /// `Update` only (v1.3): wait for mains power.
        public var requiresACPower: Bool?
        /// `Update` only (v1.3): the task's background pacing, request headers (all of them,
        /// replaced), title, description (`""` clears) and metadata (replaced).
        public var background: Bool?
        public var headers: [String: String]?
        public var title: String?
        public var taskDescription: String?
        public var metadata: [String: MetadataValue]?

        public init(
            priority: Priority? = nil, maxBytesPerSecond: UInt64? = nil, allowMetered: Bool? = nil,
            proxy: ProxySetting? = nil
        ) {
            self.priority = priority
            self.maxBytesPerSecond = maxBytesPerSecond
            self.allowMetered = allowMetered
            self.proxy = proxy
        }

        public var isEmpty: Bool {
            priority == nil && maxBytesPerSecond == nil && allowMetered == nil && proxy == nil && requiresACPower == nil
                && background == nil
                && headers == nil
                && title == nil && taskDescription == nil && metadata == nil
        }
    }

    public mutating func apply(_ change: Change) {
        if let priority = change.priority { self.priority = priority }
        if let rate = change.maxBytesPerSecond { maxBytesPerSecond = rate }
        if let allow = change.allowMetered { allowMetered = allow }
        if let requires = change.requiresACPower { requiresACPower = requires }
        if let proxy = change.proxy { self.proxy = proxy }
        if let background = change.background { self.background = background }
        if let headers = change.headers { self.headers = headers }
        if let title = change.title { self.title = title.isEmpty ? nil : title }
        if let text = change.taskDescription { taskDescription = text.isEmpty ? nil : text }
        if let metadata = change.metadata { self.metadata = metadata }
    }

    /// The most ranged connections one download may open.
    public static let maxConnections = 16

    /// C0, DEL and C1: a title is one line a person reads.
    static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// Keys of 1 to 255 bytes without control characters, finite numbers, at most
    /// `maxMetadataBytes` as stored.
    func validateMetadata() throws {
        for (key, value) in metadata {
            guard !key.isEmpty, key.utf8.count <= DownloadOptions.maxMetadataKeyBytes,
                !DownloadOptions.hasControlCharacters(key)
            else {
                throw DownloadError.invalidArgument(
                    "metadata keys are 1 to \(DownloadOptions.maxMetadataKeyBytes) bytes without control characters"
                )
            }
            if case .double(let number) = value, !number.isFinite {
                throw DownloadError.invalidArgument("metadata '\(key)' is not a finite number")
            }
        }
        guard !metadata.isEmpty else { return }
        // Encoded only when a bound says it might be too long: validated twice a Start, it was
        // the most of a small download's JSON work.
        let bound = metadata.reduce(2) { $0 + 4 + 6 * $1.key.utf8.count + $1.value.storedBytesBound }
        guard bound > DownloadOptions.maxMetadataBytes else { return }
        let size = (try? JSONEncoder().encode(metadata).count) ?? Int.max
        guard size <= DownloadOptions.maxMetadataBytes else {
            throw DownloadError.invalidArgument(
                "metadata comes to \(size) bytes stored; at most \(DownloadOptions.maxMetadataBytes)")
        }
    }

    /// The headers that carry the caller's credentials (as `RedirectRules` names them).
    public static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// Forgets what is secret (credential headers, a proxy's password): what a task that ended for
    /// good (finished or cancelled) no longer needs, so the store does not keep it for its
    /// retention. A failed task keeps them for `Resume`. Returns whether anything was forgotten.
    @discardableResult
    public mutating func eraseSecrets() -> Bool {
        var erased = false
        for name in headers.keys where DownloadOptions.secretHeaders.contains(name.lowercased()) {
            headers[name] = nil
            erased = true
        }
        if case .http(let host, let port, _?)? = proxy {
            proxy = .http(host: host, port: port, credentials: nil)
            erased = true
        }
        if clientCertificate != nil {
            clientCertificate = nil
            erased = true
        }
        return erased
    }

    /// Checks headers, texts, metadata and limits; throws InvalidArgument with a reason.
    public func validate() throws {
        for (name, value) in headers { try HTTPFieldRules.checkCallerHeader(name: name, value: value) }
        guard (1...DownloadOptions.maxConnections).contains(connections) else {
            throw DownloadError.invalidArgument("connections must be between 1 and \(DownloadOptions.maxConnections)")
        }
        for (name, text) in [("title", title), ("description", taskDescription)] {
            guard let text else { continue }
            guard text.utf8.count <= DownloadOptions.maxTextBytes else {
                throw DownloadError.invalidArgument(
                    "\(name) is \(text.utf8.count) bytes; at most \(DownloadOptions.maxTextBytes)")
            }
            guard !DownloadOptions.hasControlCharacters(text) else {
                throw DownloadError.invalidArgument(
                    "\(name) must not contain control characters (line breaks, tabs, escapes)")
            }
        }
        try validateMetadata()
        guard mirrors.count <= DownloadOptions.maxMirrors else {
            throw DownloadError.invalidArgument("at most \(DownloadOptions.maxMirrors) mirrors, got \(mirrors.count)")
        }
        for (name, value) in [
            ("connect_timeout", connectTimeout), ("stall_timeout", stallTimeout), ("resource_timeout", resourceTimeout),
            ("low_speed_time", lowSpeedTime),
        ] {
            if let value, !(value > 0 && value <= 86_400 * 7) {
                throw DownloadError.invalidArgument("\(name) must be between 0 and 604800 seconds")
            }
        }
        guard pinnedPublicKeys.count <= DownloadOptions.maxPinnedKeys else {
            throw DownloadError.invalidArgument("at most \(DownloadOptions.maxPinnedKeys) pinned_public_keys")
        }
        for pin in pinnedPublicKeys where DownloadOptions.pinnedKeyDigest(pin) == nil {
            throw DownloadError.invalidArgument(
                "pinned_public_keys takes sha256//BASE64 (the SHA-256 of the key's SubjectPublicKeyInfo, as curl's --pinnedpubkey), not '\(DisplayText.quoted(pin, limit: 60))'"
            )
        }
        if trustPinnedOnly && pinnedPublicKeys.isEmpty {
            throw DownloadError.invalidArgument("trust_pinned_only needs pinned_public_keys")
        }
    }

    /// Most `pinned_public_keys` a task takes.
    public static let maxPinnedKeys = 16

    /// The 32 bytes a `sha256//BASE64` pin names; nil when it is not one.
    public static func pinnedKeyDigest(_ pin: String) -> [UInt8]? {
        guard pin.hasPrefix("sha256//"), let digest = Data(base64Encoded: String(pin.dropFirst(8))), digest.count == 32
        else { return nil }
        return Array(digest)
    }
}
