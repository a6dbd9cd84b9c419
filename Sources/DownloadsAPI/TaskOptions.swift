import DBus

/// The `a{sv}` options of `Start` and `ResumeWithData`, typed. Decoding is strict (an unknown
/// key, a wrong type or an out-of-range value is `InvalidArgument` with a reason, as importd
/// refuses unknown flags); encoding gives what a client sends. nil = not given (the default).
public struct TaskOptions: Sendable, Hashable {
    public enum Key: String, Sendable, Hashable, CaseIterable, Comparable {
        case session, headers, sha256, priority
        case maxBytesPerSecond = "max_bytes_per_second"
        case connections, overwrite
        case allowMetered = "allow_metered"
        case requiresACPower = "requires_ac_power"
        case connectTimeout = "connect_timeout"
        case stallTimeout = "stall_timeout"
        case resourceTimeout = "resource_timeout"
        case desktopEntry = "desktop_entry"
        case lowSpeedLimit = "low_speed_limit"
        case lowSpeedTime = "low_speed_time"
        case proxy
        case background
        case title
        case description
        case metadata
        case checksum
        case earliestBegin = "earliest_begin"
        case mirrors
        case useMetalinkHeaders = "use_metalink_headers"
        case metalink
        /// ResumeWithData only: carry on at this URL.
        case url
        /// ResumeWithData only (v1.3): a directory (or the file) descriptor to make the files below.
        case destinationFD = "destination_fd"
        /// Upload and UploadAt only (v1.3).
        case method
        case contentType = "content_type"
        case form
        case replyDestination = "reply_destination"
        case snapshot
        /// Upload and UploadAt only (v1.3): resumable uploads.
        case transferProtocol = "protocol"
        case ietfVersion = "ietf_version"
        case terminateOnCancel = "terminate_on_cancel"
        /// v1.4: the server's public key must be one of these (`sha256//BASE64`, curl's `--pinnedpubkey`).
        case pinnedPublicKeys = "pinned_public_keys"
        /// v1.4: trust a self-signed server by its pinned key alone.
        case trustPinnedOnly = "trust_pinned_only"
        /// v1.4: a descriptor of a PEM file with the client certificate (chain) and its private key.
        case clientCertificate = "client_certificate"
        case clientCertificatePassphrase = "client_certificate_passphrase"
        /// v1.4: the page the download was found on (`Referer`, `user.xdg.referrer.url`).
        case referrer
        /// v1.4: false: no `user.xdg.origin.url` on the finished file.
        case originAttributes = "origin_attributes"
        /// v1.4: the finished file goes into the owner's recently used files.
        case addToRecent = "add_to_recent"
        /// v1.5: once finished, offer the file to the local network by its SHA-256 (LAN peers).
        case share
        case shareMaxAge = "share_max_age"
        case shareLimit = "share_limit"
        /// v1.5: the file may also come from machines of the local network that have it by its SHA-256.
        case lanPeers = "lan_peers"
        /// v1.5: a conditional download: a 304 finishes it with the destination untouched.
        case ifModifiedSince = "if_modified_since"
        case ifNoneMatch = "if_none_match"
        /// The file's length the caller knows (apt's `Expected-Checksum-FileSize`): another
        /// length fails the task; a small one (at most 1 MiB) does not wait for a transfer place.
        case expectedSize = "expected_size"

        public static func < (a: Key, b: Key) -> Bool { a.rawValue < b.rawValue }
    }

    public enum Priority: String, Sendable, Hashable, CaseIterable {
        case low, normal, high
    }

    /// What only an upload takes.
    public static let uploadOnlyKeys: Set<Key> = [
        .method, .contentType, .form, .replyDestination, .snapshot, .transferProtocol, .ietfVersion, .terminateOnCancel,
    ]
    /// What only a download takes (refused on an upload with a reason).
    public static let downloadOnlyKeys: Set<Key> = [
        .sha256, .checksum, .connections, .overwrite, .mirrors, .useMetalinkHeaders, .metalink, .referrer,
        .originAttributes, .addToRecent, .share, .shareMaxAge, .shareLimit, .lanPeers,
        .ifModifiedSince, .ifNoneMatch, .expectedSize,
    ]
    /// What `Start` takes.
    public static let startKeys = Set(Key.allCases).subtracting([.url, .destinationFD]).subtracting(uploadOnlyKeys)
    /// What the files of a group take: a group's files are published together, so none is a
    /// conditional download (a 304 publishes nothing).
    public static let groupKeys = startKeys.subtracting([.ifModifiedSince, .ifNoneMatch])
    /// What `Upload` and `UploadAt` take.
    public static let uploadKeys = Set(Key.allCases).subtracting([.url, .destinationFD]).subtracting(downloadOnlyKeys)
    /// What a task's `Update` takes (v1.3): what may change while the task exists.
    public static let updateKeys: Set<Key> = [
        .priority, .maxBytesPerSecond, .background, .allowMetered, .requiresACPower, .headers, .title, .description,
        .metadata,
    ]
    /// What `ResumeWithData` takes (what may change on an existing task).
    public static let resumeKeys: Set<Key> = [
        .priority, .maxBytesPerSecond, .allowMetered, .proxy, .url, .destinationFD,
    ]
    /// Longest session name, in bytes.
    public static let maxSessionBytes = 255
    public static let maxConnections: UInt32 = 16
    /// Request headers a task may carry, and their sizes in bytes.
    public static let maxHeaders = 64
    public static let maxHeaderBytes = 8 * 1024
    public static let maxAllHeaderBytes = 32 * 1024

    public var session: String?
    public var headers: [String: String]?
    /// The older form of `checksum` `sha256:HEX`, still taken.
    public var sha256: String?
    public var priority: Priority?
    public var maxBytesPerSecond: UInt64?
    public var connections: UInt32?
    public var overwrite: Bool?
    public var allowMetered: Bool?
    /// Wait while the machine runs on battery.
    public var requiresACPower: Bool?
    /// Seconds.
    public var connectTimeout: Double?
    public var stallTimeout: Double?
    public var resourceTimeout: Double?
    /// The calling app's desktop file id (`org.gnome.Epiphany.desktop`).
    public var desktopEntry: String?
    /// Bytes per second below which, for `lowSpeedTime` seconds, a transfer ends as `Timeout`
    /// (retried); 0 turns the check off (curl's `--speed-limit`/`--speed-time`).
    public var lowSpeedLimit: UInt64?
    public var lowSpeedTime: UInt32?
    /// `http://[user:password@]host:port`, `socks5://host:port`, `socks5h://host:port` or
    /// `direct://` (checked by the service); not given: the daemon's own proxy settings.
    public var proxy: String?
    /// Longest proxy URL, in bytes.
    public static let maxProxyBytes = 2048
    /// ResumeWithData: the URL to carry on at (checked by the service as Start's).
    public var url: String?
    /// ResumeWithData: where the task makes its files from now on (a descriptor the caller holds).
    public var destinationFD: UnixFD?
    /// Use only the bandwidth nobody else is using (a background transfer that gives way).
    public var background: Bool?
    /// What the app calls the download, and a line about it (shown by the desktop agent).
    public var title: String?
    public var taskDescription: String?
    /// The app's own data: D-Bus basic types only (`FindTasks` matches on it).
    public var metadata: [String: DBusValue]?
    /// `ALGO:HEX` (sha256, sha384, sha512, sha1, md5), checked by the service.
    public var checksum: String?
    /// Unix seconds: the task does not begin before.
    public var earliestBegin: UInt64?
    /// The file's length in bytes, as the caller knows it (checked by the service).
    public var expectedSize: UInt64?
    /// More URLs of the same file (checked by the service as the URL is).
    public var mirrors: [String]?
    /// `sha256//BASE64` of the public keys the server's certificate may have (checked by the service).
    public var pinnedPublicKeys: [String]?
    /// With `pinnedPublicKeys`: a self-signed server is trusted by its key instead of the system's store.
    public var trustPinnedOnly: Bool?
    /// A PEM file with the certificate a TLS server that asks for one is given, and its key (read by the service).
    public var clientCertificate: UnixFD?
    /// The passphrase of `clientCertificate`'s encrypted key.
    public var clientCertificatePassphrase: String?
    /// false: ignore `Link: rel=duplicate` and `Digest` headers (default true).
    public var useMetalinkHeaders: Bool?
    /// A Metalink v4 document (the bytes of a `.meta4`): its URLs, by priority, become the URL
    /// and mirrors, its strongest hash the checksum.
    public var metalink: [UInt8]?
    /// The same as a path (`s`) the caller can read: the service reads it as the caller.
    public var metalinkPath: String?
    /// Upload: `PUT` (default), `POST` or `PATCH` (checked by the service).
    public var method: String?
    /// Upload: the body's `Content-Type` (a form's file part's).
    public var contentType: String?
    /// Upload: send the file as `multipart/form-data`.
    public var form: Form?
    /// Upload: an absolute path, made as the caller, for the response's body.
    public var replyDestination: String?
    /// Upload: copy the file into the service's state directory first.
    public var snapshot: Bool?
    /// Upload: `plain`, `ietf`, `tus` or `auto` (checked by the service).
    public var transferProtocol: String?
    /// Upload: the IETF draft's interop version to speak (3, 5 or 6; checked by the service).
    public var ietfVersion: UInt32?
    /// Upload: `DELETE` the upload resource on `Cancel` (default true).
    public var terminateOnCancel: Bool?
    /// The page the download was found on (an http(s) URL, checked by the service).
    public var referrer: String?
    /// false: the finished file records nothing of where it came from (default true).
    public var originAttributes: Bool?
    /// Add the finished file to the owner's recently used files (default false).
    public var addToRecent: Bool?
    /// v1.5: once finished, offer the file to the local network by its SHA-256 (default false),
    /// for `shareMaxAge` seconds (default 86,400) or `shareLimit` downloads (default 5).
    public var share: Bool?
    public var shareMaxAge: UInt32?
    public var shareLimit: UInt32?
    /// v1.5: the file may also come from machines of the local network that have it by its
    /// SHA-256 (default false; used when the task has a whole-file sha-256).
    public var lanPeers: Bool?
    /// v1.5: Unix seconds sent as `If-Modified-Since`, and entity tags sent as `If-None-Match`,
    /// with a request from the file's start.
    public var ifModifiedSince: Int64?
    public var ifNoneMatch: String?
    /// The longest a file may be offered: 30 days.
    public static let maxShareAge: UInt32 = 30 * 86_400

    /// The `form` option: the file as the part `field` (named `filename`; default the source's
    /// name), after the text parts `fields`.
    public struct Form: Sendable, Hashable {
        public var field: String
        public var filename: String?
        public var fields: [String: String]

        public init(field: String, filename: String? = nil, fields: [String: String] = [:]) {
            self.field = field
            self.filename = filename
            self.fields = fields
        }
    }

    public init() {}

    /// The D-Bus basic types metadata may hold (not `h`: a descriptor is no data to keep).
    public static let metadataTypes = "ybnqiuxtdsog"

    /// Whether `value` is of a type `metadata` takes.
    public static func isMetadataValue(_ value: DBusValue) -> Bool {
        let signature = value.type.signature
        return signature.count == 1 && metadataTypes.contains(signature)
    }

    /// `a{sv}` whose values are basic types, else `InvalidArgument` naming the key.
    public static func checkedMetadata(_ value: DBusValue, option: String) throws -> [String: DBusValue] {
        guard let dict = value.vardictValue else {
            throw DownloadsErrorName.invalidArgument.error(
                "option '\(option)' must be of type a{sv}, got \(value.type.signature)")
        }
        for (key, inner) in dict.sorted(by: { $0.key < $1.key }) where !isMetadataValue(inner) {
            throw DownloadsErrorName.invalidArgument.error(
                "\(option) '\(key)' is of type \(inner.type.signature); metadata takes D-Bus basic types only (\(metadataTypes.map(String.init).joined(separator: " ")))"
            )
        }
        return dict
    }

    /// Decodes `options`, refusing keys outside `allowed`.
    public init(_ options: [String: DBusValue], allowed: Set<Key> = TaskOptions.startKeys) throws {
        for (name, value) in options.sorted(by: { $0.key < $1.key }) {
            guard let key = Key(rawValue: name), allowed.contains(key) else {
                throw DownloadsErrorName.invalidArgument.error(
                    "unknown option '\(name)' (known: \(allowed.sorted().map(\.rawValue).joined(separator: ", ")))"
                )
            }
            func wrongType(_ signature: String) -> BusError {
                DownloadsErrorName.invalidArgument.error(
                    "option '\(name)' must be of type \(signature), got \(value.type.signature)")
            }
            switch key {
            case .session:
                guard case .string(let text) = value else { throw wrongType("s") }
                session = try TaskOptions.checkedSession(text)
            case .headers:
                guard let dict = value.stringDictValue else { throw wrongType("a{ss}") }
                try TaskOptions.checkHeaderSizes(dict)
                headers = dict
            case .sha256:
                guard case .string(let text) = value else { throw wrongType("s") }
                sha256 = text.lowercased()
            case .priority:
                guard case .string(let text) = value else { throw wrongType("s") }
                guard let level = Priority(rawValue: text) else {
                    throw DownloadsErrorName.invalidArgument.error("priority must be low, normal or high")
                }
                priority = level
            case .maxBytesPerSecond:
                guard case .uint64(let rate) = value else { throw wrongType("t") }
                maxBytesPerSecond = rate
            case .lowSpeedLimit:
                guard case .uint64(let rate) = value else { throw wrongType("t") }
                lowSpeedLimit = rate
            case .lowSpeedTime:
                guard case .uint32(let seconds) = value else { throw wrongType("u") }
                guard seconds >= 1 && seconds <= 604_800 else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "low_speed_time must be between 1 and 604800 seconds")
                }
                lowSpeedTime = seconds
            case .connections:
                guard case .uint32(let count) = value else { throw wrongType("u") }
                guard count >= 1 && count <= TaskOptions.maxConnections else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "connections: 1 to \(TaskOptions.maxConnections) connections per download are supported"
                    )
                }
                connections = count
            case .overwrite:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                overwrite = flag
            case .allowMetered:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                allowMetered = flag
            case .requiresACPower:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                requiresACPower = flag
            case .background:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                background = flag
            case .proxy:
                guard case .string(let text) = value else { throw wrongType("s") }
                guard text.utf8.count <= TaskOptions.maxProxyBytes else {
                    throw DownloadsErrorName.quotaExceeded.error(
                        "the proxy is \(text.utf8.count) bytes; at most \(TaskOptions.maxProxyBytes)")
                }
                proxy = text
            case .url:
                guard case .string(let text) = value else { throw wrongType("s") }
                url = text
            case .destinationFD:
                guard case .unixFD(let fd) = value else { throw wrongType("h") }
                destinationFD = fd
            case .title:
                guard case .string(let text) = value else { throw wrongType("s") }
                title = text
            case .description:
                guard case .string(let text) = value else { throw wrongType("s") }
                taskDescription = text
            case .metadata:
                metadata = try TaskOptions.checkedMetadata(value, option: name)
            case .checksum:
                guard case .string(let text) = value else { throw wrongType("s") }
                checksum = text
            case .earliestBegin:
                guard case .uint64(let seconds) = value else { throw wrongType("t (Unix seconds)") }
                earliestBegin = seconds
            case .expectedSize:
                guard case .uint64(let bytes) = value else { throw wrongType("t (bytes)") }
                guard bytes <= UInt64(Int64.max) else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "expected_size is more bytes than any file has: \(bytes)")
                }
                expectedSize = bytes
            case .mirrors:
                guard let urls = value.stringArrayValue else { throw wrongType("as") }
                mirrors = urls
            case .pinnedPublicKeys:
                guard let pins = value.stringArrayValue else { throw wrongType("as") }
                pinnedPublicKeys = pins
            case .trustPinnedOnly:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                trustPinnedOnly = flag
            case .clientCertificate:
                guard case .unixFD(let fd) = value else { throw wrongType("h") }
                clientCertificate = fd
            case .clientCertificatePassphrase:
                guard case .string(let text) = value else { throw wrongType("s") }
                guard text.utf8.count <= 1024 else {
                    throw DownloadsErrorName.invalidArgument.error("client_certificate_passphrase is over 1024 bytes")
                }
                clientCertificatePassphrase = text
            case .useMetalinkHeaders:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                useMetalinkHeaders = flag
            case .metalink:
                if case .string(let path) = value {
                    metalinkPath = path
                } else {
                    guard let bytes = value.bytesValue else {
                        throw wrongType("ay (the document's bytes) or s (its path)")
                    }
                    metalink = bytes
                }
            case .desktopEntry:
                guard case .string(let text) = value else { throw wrongType("s") }
                desktopEntry = try TaskOptions.checkedDesktopEntry(text)
            case .method:
                guard case .string(let text) = value else { throw wrongType("s") }
                method = text
            case .contentType:
                guard case .string(let text) = value else { throw wrongType("s") }
                contentType = text
            case .replyDestination:
                guard case .string(let text) = value else { throw wrongType("s") }
                replyDestination = text
            case .snapshot:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                snapshot = flag
            case .transferProtocol:
                guard case .string(let text) = value else { throw wrongType("s") }
                transferProtocol = text
            case .ietfVersion:
                guard case .uint32(let number) = value else { throw wrongType("u") }
                ietfVersion = number
            case .terminateOnCancel:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                terminateOnCancel = flag
            case .referrer:
                guard case .string(let text) = value else { throw wrongType("s") }
                referrer = text
            case .originAttributes:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                originAttributes = flag
            case .addToRecent:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                addToRecent = flag
            case .share:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                share = flag
            case .shareMaxAge:
                guard case .uint32(let seconds) = value else { throw wrongType("u") }
                guard seconds >= 1, seconds <= Self.maxShareAge else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "share_max_age must be between 1 and \(Self.maxShareAge) seconds (30 days)")
                }
                shareMaxAge = seconds
            case .shareLimit:
                guard case .uint32(let count) = value else { throw wrongType("u") }
                guard count >= 1 else {
                    throw DownloadsErrorName.invalidArgument.error("share_limit must be at least 1")
                }
                shareLimit = count
            case .lanPeers:
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                lanPeers = flag
            case .ifModifiedSince:
                guard case .int64(let seconds) = value else { throw wrongType("x (Unix seconds)") }
                // An HTTP-date names years 0001 to 9999 only.
                guard seconds >= 0, seconds < 253_402_300_800 else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "if_modified_since must be Unix seconds from 1970 to 9999, got \(seconds)")
                }
                ifModifiedSince = seconds
            case .ifNoneMatch:
                guard case .string(let text) = value else { throw wrongType("s") }
                ifNoneMatch = text
            case .form:
                form = try TaskOptions.checkedForm(value)
            case .connectTimeout, .stallTimeout, .resourceTimeout:
                let seconds: Double
                switch value {
                case .uint32(let v): seconds = Double(v)
                case .double(let v): seconds = v
                default: throw wrongType("u or d (seconds)")
                }
                guard seconds > 0 && seconds <= 604_800 else {
                    throw DownloadsErrorName.invalidArgument.error("\(name) must be between 0 and 604800 seconds")
                }
                if key == .connectTimeout { connectTimeout = seconds }
                if key == .stallTimeout { stallTimeout = seconds }
                if key == .resourceTimeout { resourceTimeout = seconds }
            }
        }
    }

    /// The `form` option: `a{sv}` with `field` s (required), `filename` s, `fields` a{ss}.
    public static func checkedForm(_ value: DBusValue) throws -> Form {
        guard let dict = value.vardictValue else {
            throw DownloadsErrorName.invalidArgument.error(
                "option 'form' must be of type a{sv}, got \(value.type.signature)")
        }
        var form = Form(field: "")
        for (key, inner) in dict.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "field":
                guard case .string(let text) = inner else {
                    throw DownloadsErrorName.invalidArgument.error("form 'field' must be s")
                }
                form.field = text
            case "filename":
                guard case .string(let text) = inner else {
                    throw DownloadsErrorName.invalidArgument.error("form 'filename' must be s")
                }
                form.filename = text
            case "fields":
                guard let fields = inner.stringDictValue else {
                    throw DownloadsErrorName.invalidArgument.error("form 'fields' must be a{ss}")
                }
                form.fields = fields
            default:
                throw DownloadsErrorName.invalidArgument.error(
                    "unknown form key '\(key.prefix(64))' (known: field, filename, fields)")
            }
        }
        guard !form.field.isEmpty else {
            throw DownloadsErrorName.invalidArgument.error("form needs 'field': the name of the file's part")
        }
        let texts = [form.field, form.filename ?? ""] + form.fields.keys + form.fields.values
        guard texts.allSatisfy({ !$0.unicodeScalars.contains { $0 == "\r" || $0 == "\n" || $0 == "\0" } }) else {
            throw DownloadsErrorName.invalidArgument.error("form names and values must not contain CR, LF or NUL")
        }
        guard texts.reduce(0, { $0 + $1.utf8.count }) <= maxAllHeaderBytes, form.fields.count <= maxHeaders else {
            throw DownloadsErrorName.quotaExceeded.error(
                "a form takes at most \(maxHeaders) fields and \(maxAllHeaderBytes) bytes of names and values")
        }
        return form
    }

    /// At most `maxHeaders` headers, each name and value at most `maxHeaderBytes` and all of them
    /// at most `maxAllHeaderBytes`, counted in bytes: `QuotaExceeded` beyond.
    public static func checkHeaderSizes(_ headers: [String: String]) throws {
        guard headers.count <= maxHeaders else {
            throw DownloadsErrorName.quotaExceeded.error("at most \(maxHeaders) headers, got \(headers.count)")
        }
        var total = 0
        for (name, value) in headers {
            guard name.utf8.count <= maxHeaderBytes, value.utf8.count <= maxHeaderBytes else {
                throw DownloadsErrorName.quotaExceeded.error(
                    "a header name or value is longer than \(maxHeaderBytes) bytes")
            }
            total += name.utf8.count + value.utf8.count
        }
        guard total <= maxAllHeaderBytes else {
            throw DownloadsErrorName.quotaExceeded.error(
                "the headers come to \(total) bytes; at most \(maxAllHeaderBytes)")
        }
    }

    /// A desktop file id as the Desktop Entry Specification names them: letters, digits, `-`,
    /// `_` and `.`, ending in `.desktop`, at most 255 bytes.
    public static func checkedDesktopEntry(_ id: String) throws -> String {
        let allowed = id.utf8.allSatisfy { byte in
            (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
        guard allowed, id.hasSuffix(".desktop"), id.utf8.count > 8, id.utf8.count <= 255, !id.hasPrefix("."),
            !id.hasPrefix("-")
        else {
            throw DownloadsErrorName.invalidArgument.error(
                "desktop_entry must be a desktop file id such as org.gnome.Epiphany.desktop, got '\(id)'"
            )
        }
        return id
    }

    /// A session name: 1 to 255 bytes of UTF-8.
    public static func checkedSession(_ name: String) throws -> String {
        guard !name.isEmpty, name.utf8.count <= maxSessionBytes else {
            throw DownloadsErrorName.invalidArgument.error("session must be 1 to \(maxSessionBytes) bytes")
        }
        // U+001F separates a sandboxed app's id from its session's name in the store.
        guard !name.unicodeScalars.contains("\u{1F}") else {
            throw DownloadsErrorName.invalidArgument.error("session names cannot contain U+001F")
        }
        return name
    }

    /// What a client sends: only the options that were set.
    public var dictionary: [String: DBusValue] {
        var result: [String: DBusValue] = [:]
        if let session { result[Key.session.rawValue] = .string(session) }
        if let headers { result[Key.headers.rawValue] = .stringDict(headers) }
        if let sha256 { result[Key.sha256.rawValue] = .string(sha256) }
        if let priority { result[Key.priority.rawValue] = .string(priority.rawValue) }
        if let maxBytesPerSecond { result[Key.maxBytesPerSecond.rawValue] = .uint64(maxBytesPerSecond) }
        if let connections { result[Key.connections.rawValue] = .uint32(connections) }
        if let overwrite { result[Key.overwrite.rawValue] = .boolean(overwrite) }
        if let allowMetered { result[Key.allowMetered.rawValue] = .boolean(allowMetered) }
        if let requiresACPower { result[Key.requiresACPower.rawValue] = .boolean(requiresACPower) }
        if let connectTimeout { result[Key.connectTimeout.rawValue] = .double(connectTimeout) }
        if let stallTimeout { result[Key.stallTimeout.rawValue] = .double(stallTimeout) }
        if let resourceTimeout { result[Key.resourceTimeout.rawValue] = .double(resourceTimeout) }
        if let desktopEntry { result[Key.desktopEntry.rawValue] = .string(desktopEntry) }
        if let lowSpeedLimit { result[Key.lowSpeedLimit.rawValue] = .uint64(lowSpeedLimit) }
        if let lowSpeedTime { result[Key.lowSpeedTime.rawValue] = .uint32(lowSpeedTime) }
        if let proxy { result[Key.proxy.rawValue] = .string(proxy) }
        if let url { result[Key.url.rawValue] = .string(url) }
        if let destinationFD { result[Key.destinationFD.rawValue] = .unixFD(destinationFD) }
        if let background { result[Key.background.rawValue] = .boolean(background) }
        if let title { result[Key.title.rawValue] = .string(title) }
        if let taskDescription { result[Key.description.rawValue] = .string(taskDescription) }
        if let metadata { result[Key.metadata.rawValue] = .vardict(metadata) }
        if let checksum { result[Key.checksum.rawValue] = .string(checksum) }
        if let earliestBegin { result[Key.earliestBegin.rawValue] = .uint64(earliestBegin) }
        if let expectedSize { result[Key.expectedSize.rawValue] = .uint64(expectedSize) }
        if let mirrors { result[Key.mirrors.rawValue] = .strings(mirrors) }
        if let pinnedPublicKeys { result[Key.pinnedPublicKeys.rawValue] = .strings(pinnedPublicKeys) }
        if let trustPinnedOnly { result[Key.trustPinnedOnly.rawValue] = .boolean(trustPinnedOnly) }
        if let clientCertificate { result[Key.clientCertificate.rawValue] = .unixFD(clientCertificate) }
        if let clientCertificatePassphrase {
            result[Key.clientCertificatePassphrase.rawValue] = .string(clientCertificatePassphrase)
        }
        if let useMetalinkHeaders { result[Key.useMetalinkHeaders.rawValue] = .boolean(useMetalinkHeaders) }
        if let metalink { result[Key.metalink.rawValue] = .bytes(metalink) }
        if let metalinkPath { result[Key.metalink.rawValue] = .string(metalinkPath) }
        if let method { result[Key.method.rawValue] = .string(method) }
        if let contentType { result[Key.contentType.rawValue] = .string(contentType) }
        if let replyDestination { result[Key.replyDestination.rawValue] = .string(replyDestination) }
        if let snapshot { result[Key.snapshot.rawValue] = .boolean(snapshot) }
        if let transferProtocol { result[Key.transferProtocol.rawValue] = .string(transferProtocol) }
        if let ietfVersion { result[Key.ietfVersion.rawValue] = .uint32(ietfVersion) }
        if let terminateOnCancel { result[Key.terminateOnCancel.rawValue] = .boolean(terminateOnCancel) }
        if let referrer { result[Key.referrer.rawValue] = .string(referrer) }
        if let originAttributes { result[Key.originAttributes.rawValue] = .boolean(originAttributes) }
        if let addToRecent { result[Key.addToRecent.rawValue] = .boolean(addToRecent) }
        if let share { result[Key.share.rawValue] = .boolean(share) }
        if let shareMaxAge { result[Key.shareMaxAge.rawValue] = .uint32(shareMaxAge) }
        if let shareLimit { result[Key.shareLimit.rawValue] = .uint32(shareLimit) }
        if let lanPeers { result[Key.lanPeers.rawValue] = .boolean(lanPeers) }
        if let ifModifiedSince { result[Key.ifModifiedSince.rawValue] = .int64(ifModifiedSince) }
        if let ifNoneMatch { result[Key.ifNoneMatch.rawValue] = .string(ifNoneMatch) }
        if let form {
            var parts: [String: DBusValue] = ["field": .string(form.field)]
            if let filename = form.filename { parts["filename"] = .string(filename) }
            if !form.fields.isEmpty { parts["fields"] = .stringDict(form.fields) }
            result[Key.form.rawValue] = .vardict(parts)
        }
        return result
    }
}
