import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI
import Foundation
import Metalink
import ProxyRules
import TerminalOutput
import ShownText

/// The arguments of `Start` (and the options of `ResumeWithData`) turned into what the engine
/// takes: URLs must be http(s) with a host, destinations absolute without `..`; every refusal
/// is `InvalidArgument` with a reason.
enum StartRequest {
    /// Longest URL and destination, in bytes (`QuotaExceeded` beyond).
    static let maxURLBytes = 8 * 1024
    static let maxPathBytes = 4096

    static func checkURL(_ text: String) throws -> String {
        guard text.utf8.count <= maxURLBytes else {
            throw DownloadsErrorName.quotaExceeded.error("the URL is \(text.utf8.count) bytes; at most \(maxURLBytes)")
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            throw DownloadsErrorName.invalidArgument.error("'\(text)' is not a URL")
        }
        guard Source.isSourceScheme(scheme) else {
            throw DownloadsErrorName.invalidArgument.error(
                "only http and https URLs can be downloaded, not '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadsErrorName.invalidArgument.error("the URL has no host")
        }
        guard !URLCharacters.containSpaceOrControl(text) else {
            throw DownloadsErrorName.invalidArgument.error("the URL contains spaces or control characters")
        }
        guard url.user == nil && url.password == nil else {
            // Start has taken them out already (`URLCredentials`); anywhere else they would
            // be stored, shown and never sent.
            throw DownloadsErrorName.invalidArgument.error(
                "this URL carries a user name or password: only Start's URL may (they become its Authorization header)"
            )
        }
        return text
    }

    /// The `referrer` option: an http(s) URL, its `user:password@` taken out (it is sent to
    /// servers and written on files: a browser's referrer never carries them either).
    static func checkReferrer(_ text: String) throws -> String {
        let plain = Source(text)?.withoutCredentials ?? text
        do {
            return try checkURL(plain)
        } catch let error as BusError {
            throw BusError(name: error.name, message: "referrer: " + error.message)
        }
    }

    /// An absolute path without `..` (`what` names it in the refusal: a destination, an
    /// upload's source or reply destination).
    static func checkDestination(_ path: String, what: String = "destination") throws -> String {
        guard path.utf8.count <= maxPathBytes else {
            throw DownloadsErrorName.quotaExceeded.error(
                "the \(what) is \(path.utf8.count) bytes; at most \(maxPathBytes)")
        }
        guard path.hasPrefix("/") else {
            throw DownloadsErrorName.invalidArgument.error(
                "\(what) must be an absolute path, got '\(DisplayText.quoted(path, limit: 200))'")
        }
        guard !path.split(separator: "/").contains(".."), !path.utf8.contains(0) else {
            throw DownloadsErrorName.invalidArgument.error("\(what) must not contain '..'")
        }
        return path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    /// The engine's options for a new task.
    static func downloadOptions(_ options: TaskOptions) throws -> DownloadOptions {
        var result = DownloadOptions()
        if let headers = options.headers { result.headers = headers }
        result.checksum = try checksum(options)
        result.title = options.title
        result.taskDescription = options.taskDescription
        if let metadata = options.metadata { result.metadata = MetadataValue.dictionary(metadata) }
        result.earliestBegin = try options.earliestBegin.map { try checkBeginTime($0) }
        result.apply(try change(options))
        if let overwrite = options.overwrite { result.overwrite = overwrite }
        if let mirrors = options.mirrors {
            guard mirrors.count <= DownloadOptions.maxMirrors else {
                throw DownloadsErrorName.quotaExceeded.error(
                    "at most \(DownloadOptions.maxMirrors) mirrors, got \(mirrors.count)")
            }
            var seen = Set<String>()
            result.mirrors = try mirrors.compactMap { text in
                let url = try checkURL(text)
                return seen.insert(url).inserted ? url : nil
            }
            // Spread over every source unless the caller chose: two connections to each, up to 16.
            if options.connections == nil {
                result.connections = DownloadOptions.connections(mirrors: result.mirrors.count)
            }
        }
        if let connections = options.connections { result.connections = Int(connections) }
        if let use = options.useMetalinkHeaders { result.useMetalinkHeaders = use }
        result.connectTimeout = options.connectTimeout
        result.stallTimeout = options.stallTimeout
        result.resourceTimeout = options.resourceTimeout
        result.desktopEntry = options.desktopEntry
        if let background = options.background { result.background = background }
        if let lanPeers = options.lanPeers { result.lanPeers = lanPeers }
        result.ifModifiedSince = options.ifModifiedSince
        result.promisedLength = options.expectedSize.map { Int64($0) }
        if let tags = options.ifNoneMatch {
            guard !tags.isEmpty, tags.utf8.count <= TaskOptions.maxHeaderBytes, HTTPFieldRules.isFieldValue(tags) else {
                throw DownloadsErrorName.invalidArgument.error(
                    "if_none_match must be entity tags as the header gives them (\"tag\", W/\"tag\" or *): visible characters, at most \(TaskOptions.maxHeaderBytes) bytes"
                )
            }
            result.ifNoneMatch = tags
        }
        if let requires = options.requiresACPower { result.requiresACPower = requires }
        result.lowSpeedLimit = options.lowSpeedLimit
        result.lowSpeedTime = options.lowSpeedTime.map(Double.init)
        if let pins = options.pinnedPublicKeys { result.pinnedPublicKeys = pins }
        if let only = options.trustPinnedOnly { result.trustPinnedOnly = only }
        result.referrer = try options.referrer.map(checkReferrer)
        if let origin = options.originAttributes { result.originAttributes = origin }
        if let recent = options.addToRecent { result.addToRecent = recent }
        if options.share == true {
            guard result.checksum?.algorithm == .sha256 else {
                throw DownloadsErrorName.invalidArgument.error(
                    "share offers the finished file by its SHA-256: give checksum sha256:HEX (or a Metalink whose strongest hash is sha-256)"
                )
            }
            result.share = ShareTerms(
                maxAge: options.shareMaxAge ?? ShareTerms.defaultMaxAge,
                limit: options.shareLimit ?? ShareTerms.defaultLimit)
        } else if options.shareMaxAge != nil || options.shareLimit != nil {
            throw DownloadsErrorName.invalidArgument.error("share_max_age and share_limit go with share: true")
        }
        do {
            try result.validate()
        } catch {
            throw ServiceError.reply(for: error)
        }
        return result
    }

    /// A Start with a `metalink` document: the URL (when `url` is empty) and the mirrors are its
    /// file's http(s) URLs by priority, and its strongest hash is the checksum unless one is
    /// given; its piece hashes (of a hash type known here) are checked as pieces complete; its
    /// name names the file in a destination directory. One file per task.
    static func applyingMetalink(
        _ url: String, _ options: TaskOptions
    ) throws -> (url: String, options: TaskOptions, pieces: PieceHashes?, fileName: String?) {
        guard let bytes = options.metalink else { return (url, options, nil, nil) }
        let document: MetalinkDocument
        do {
            document = try MetalinkDocument.parse(bytes)
        } catch {
            throw DownloadsErrorName.invalidArgument.error(error.message)
        }
        guard document.files.count == 1, let file = document.files.first else {
            throw DownloadsErrorName.invalidArgument.error(
                "a task downloads one file; this Metalink document describes \(document.files.count): "
                    + "start it as a group (StartGroup with one entry: url \"\", the destination directory, and this metalink)"
            )
        }
        return try applying(file, url, options)
    }

    /// The task one `<file>` of a Metalink document describes: its URLs (the first, or `url`,
    /// the primary and the rest mirrors), its strongest hash and its piece hashes.
    static func applying(
        _ file: MetalinkDocument.File, _ url: String, _ options: TaskOptions
    ) throws -> (url: String, options: TaskOptions, pieces: PieceHashes?, fileName: String?) {
        let urls = file.downloadURLs().filter { (try? checkURL($0)) != nil }
        guard !url.isEmpty || !urls.isEmpty else {
            throw DownloadsErrorName.invalidArgument.error(
                "the Metalink document names no http or https URL for \(file.name)")
        }
        var options = options
        let primary = url.isEmpty ? urls[0] : url
        options.mirrors = DownloadOptions.mirrors(options.mirrors ?? [], adding: urls, besides: primary)
        if options.checksum == nil && options.sha256 == nil {
            options.checksum = file.strongestChecksum?.text
        }
        options.metalink = nil
        do throws(Checksum.Invalid) {
            return (primary, options, try file.pieceHashes(), file.fileName)
        } catch {
            throw DownloadsErrorName.invalidArgument.error(error.message)
        }
    }

    /// `checksum` (`ALGO:HEX`), or the older `sha256` (hex); not both.
    static func checksum(_ options: TaskOptions) throws -> Checksum? {
        do throws(Checksum.Invalid) {
            switch (options.checksum, options.sha256) {
            case (let text?, nil): return try Checksum.parse(text)
            case (nil, let hex?): return try Checksum(.sha256, hex: hex)
            case (nil, nil): return nil
            case (_?, _?): throw Checksum.Invalid(message: "give checksum or sha256, not both")
            }
        } catch {
            throw DownloadsErrorName.invalidArgument.error(error.message)
        }
    }

    /// How far back an `earliest_begin` may be (a clock a little behind the caller's), and how far ahead.
    static let beginTimePast: UInt64 = 86_400
    static let beginTimeFuture: UInt64 = 366 * 86_400

    /// An `earliest_begin` within the last day (it then begins at once) or the next year.
    static func checkBeginTime(
        _ seconds: UInt64, now: UInt64 = UInt64(max(0, Date().timeIntervalSince1970))
    ) throws -> UInt64 {
        guard seconds >= now - min(now, beginTimePast) else {
            throw DownloadsErrorName.invalidArgument.error(
                "earliest_begin is \(now - seconds) seconds in the past; give a Unix time from a day ago to a year ahead"
            )
        }
        guard seconds <= now + beginTimeFuture else {
            throw DownloadsErrorName.invalidArgument.error(
                "earliest_begin is more than a year ahead (\(seconds - now) seconds); give a Unix time from a day ago to a year ahead"
            )
        }
        return seconds
    }

    /// What may change on an existing task.
    static func change(_ options: TaskOptions) throws -> DownloadOptions.Change {
        let proxy: ProxySetting?
        do {
            proxy = try options.proxy.map { text throws(ProxySetting.Invalid) in try ProxySetting.parse(text) }
        } catch {
            throw DownloadsErrorName.invalidArgument.error(error.message)
        }
        return DownloadOptions.Change(
            priority: options.priority.flatMap { DownloadOptions.Priority(rawValue: $0.rawValue) },
            maxBytesPerSecond: options.maxBytesPerSecond, allowMetered: options.allowMetered, proxy: proxy
        )
    }
}
