import ArgumentParser
import FoundationEssentials
import DownloadsAPI

/// The Start options as flags (`get` and `start`).
struct TaskOptionArguments: ParsableArguments {
    @Option(help: "The session the task belongs to.") var session = "downloadsctl"
    @Option(
        help: ArgumentHelp(
            "Check the file's digest before it is kept: ALGO:HEX with sha256, sha384, sha512, sha1 or md5 (the last two only catch corruption, not tampering).",
            valueName: "algo:hex"
        ))
    var checksum: String?
    @Option(
        help: ArgumentHelp(
            "Check the file's SHA-256 (hex) before it is kept (the same as --checksum sha256:HEX).", valueName: "hex"))
    var sha256: String?
    @Option(
        help: ArgumentHelp(
            "What the download is called where the desktop shows it (default: the file's name).", valueName: "text"))
    var title: String?
    @Option(help: ArgumentHelp("A line about the download, shown under its title.", valueName: "text")) var description:
        String?
    @Option(
        name: .customLong("metadata"),
        help: ArgumentHelp(
            "Your own data on the task, KEY=VALUE (a string; repeatable): list --metadata finds tasks by it.",
            valueName: "key=value"))
    var metadata: [String] = []
    @Option(
        name: .customLong("mirror"),
        help: ArgumentHelp(
            "Another URL of the same file (repeatable): ranges are fetched from the URL and its mirrors at once; give --checksum with them.",
            valueName: "url"
        ))
    var mirrors: [String] = []
    @Option(
        name: .customLong("begin-at"),
        help: ArgumentHelp(
            "Do not begin before this time: HH:MM (the next one, local), YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM].",
            valueName: "time"
        ))
    var beginAt: String?
    @Option(
        name: .customLong("limit-rate"),
        help: ArgumentHelp(
            "At most this many bytes per second (500K, 1.5M, 2G: K = 1024, as curl's).", valueName: "bytes"))
    var limitRate: ByteRate?
    @Option(help: ArgumentHelp("Ranged connections at most (1-16), when the server allows ranges.", valueName: "n"))
    var connections: UInt32?
    @Option(help: ArgumentHelp("low, normal or high (orders only your own tasks).", valueName: "priority"))
    var priority: String?
    @Option(
        name: .customLong("header"),
        help: ArgumentHelp("An HTTP header, 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []
    @Flag(help: "Replace the destination if it exists.") var overwrite = false
    @Flag(name: .customLong("no-metered"), help: "Wait while the network is metered (as NetworkManager says).")
    var noMetered = false
    @Flag(
        name: .customLong("requires-ac-power"),
        help: "Wait while the computer runs on battery (as UPower says); paused, not lost, when it is unplugged.")
    var requiresACPower = false
    @Option(
        name: .customLong("desktop-entry"),
        help: ArgumentHelp(
            "The app the download is for (its desktop file id): the desktop shows progress under it.", valueName: "id"))
    var desktopEntry: String?
    @Option(
        name: .customLong("speed-limit"),
        help: ArgumentHelp(
            "Give up on (and retry) a transfer slower than this many bytes per second (10K: K = 1024) for --speed-time seconds (curl's; default 1, 0 turns it off).",
            valueName: "bytes"
        ))
    var speedLimit: ByteRate?
    @Option(
        name: .customLong("speed-time"),
        help: ArgumentHelp("Seconds over which --speed-limit is counted (default 60).", valueName: "seconds"))
    var speedTime: UInt32?
    @Option(
        help: ArgumentHelp(
            "The proxy for this download: http://[user:password@]host:port, socks5://host:port or socks5h://host:port (default: your desktop's proxy settings through the portal, else http_proxy/https_proxy/all_proxy/no_proxy).",
            valueName: "url"
        ))
    var proxy: String?
    @Flag(name: .customLong("no-proxy"), help: "Connect directly, whatever your settings or the service's say.")
    var noProxy = false
    @Flag(help: "Use only the bandwidth nobody else is using: give way to other traffic (shown as yielding).")
    var background = false
    @Option(
        name: .customLong("pinnedpubkey"),
        help: ArgumentHelp(
            "The server's public key must be one of these: sha256//BASE64, several joined by ';' (curl's --pinnedpubkey).",
            valueName: "hashes"))
    var pinnedPublicKeys: String?
    @Flag(
        name: .customLong("trust-pinned-only"),
        help: "With --pinnedpubkey: trust a self-signed server by its pinned key instead of the system's certificates.")
    var trustPinnedOnly = false
    @Option(
        help: ArgumentHelp(
            "A client certificate for a server that asks for one: a PEM file (with its key unless --key), and the key's passphrase after ':' (curl's --cert). Read here, as you.",
            valueName: "file[:passphrase]"))
    var cert: String?
    @Option(help: ArgumentHelp("The private key of --cert, when it is a file of its own (PEM).", valueName: "file"))
    var key: String?
    @Option(
        name: .customLong("pass"), help: ArgumentHelp("The passphrase of the key (curl's --pass).", valueName: "phrase")
    )
    var passphrase: String?
    @Option(
        name: [.customShort("e"), .customLong("referer")],
        help: ArgumentHelp(
            "The page the file was found on (curl's and wget's --referer): sent as Referer, and kept on the file as user.xdg.referrer.url.",
            valueName: "url"))
    var referrer: String?
    @Flag(
        name: .customLong("no-origin-attributes"),
        help: "Do not write where the file came from on it (user.xdg.origin.url and user.xdg.referrer.url).")
    var noOriginAttributes = false
    @Flag(
        help:
            "Once finished, offer the file to the local network by its SHA-256 (give --sha256 or --checksum sha256:HEX), on Passim's wire: for a day or 5 downloads unless --share-max-age or --share-limit say otherwise."
    )
    var share = false
    @Option(help: ArgumentHelp("Seconds the file is offered (with --share).", valueName: "seconds"))
    var shareMaxAge: UInt32?
    @Option(help: ArgumentHelp("Downloads after which the file is withdrawn (with --share).", valueName: "count"))
    var shareLimit: UInt32?
    @Flag(
        help:
            "Also take the file from machines of the local network that have it by its SHA-256 (with --sha256 or --checksum sha256:HEX); every byte is checked."
    )
    var lanPeers = false
    @Option(
        name: [.customShort("z"), .customLong("if-modified-since")],
        help: ArgumentHelp(
            "Only if the file changed since this file's modification time or this date (curl's -z; YYYY-MM-DD or ISO 8601). Unchanged (the server answers 304), nothing is written. A file that is not there asks no condition; naming the destination itself, it is replaced when newer.",
            valueName: "file|date"))
    var ifModifiedSince: String?
    @Option(
        help: ArgumentHelp(
            "Only if the server's entity tag (ETag, quotes included) is not this one: unchanged, nothing is written.",
            valueName: "etag"))
    var ifNoneMatch: String?

    /// The options for a download into `destination`: `-z` naming the destination itself
    /// replaces it when the server has a newer one (curl's `-z FILE -o FILE`).
    func taskOptions(into destination: String) throws -> TaskOptions {
        var options = try taskOptions
        if let ifModifiedSince, options.ifModifiedSince != nil, Paths.absolute(ifModifiedSince) == destination {
            options.overwrite = true
        }
        return options
    }

    /// The URL argument of `get` and `start`: a URL, or a Metalink file (`.meta4`, `.metalink`)
    /// read here, as the caller, and sent as the `metalink` option (the URL is then its first).
    static func source(_ argument: String, into options: inout TaskOptions) throws -> String {
        guard !argument.contains("://"), argument.hasSuffix(".meta4") || argument.hasSuffix(".metalink") else {
            return argument
        }
        guard let data = FileManager.default.contents(atPath: argument) else {
            throw ValidationError("cannot read the Metalink file \(argument)")
        }
        guard data.count <= 1 << 20 else { throw ValidationError("the Metalink file \(argument) is larger than 1 MiB") }
        options.metalink = Array(data)
        return ""
    }

    /// `KEY=VALUE` pairs.
    static func metadata(_ pairs: [String], option: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for pair in pairs {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw ValidationError("\(option) '\(pair)' is not KEY=VALUE")
            }
            result[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return result
    }

    /// `--header 'Name: value'` arguments.
    static func headers(_ headers: [String]) throws -> [String: String] {
        var parsed: [String: String] = [:]
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("--header '\(header)' is not 'Name: value'")
            }
            parsed[Self.trimmed(header[..<colon])] = Self.trimmed(header[header.index(after: colon)...])
        }
        return parsed
    }

    /// `FILE[:PASSPHRASE]`, as curl's `--cert` (a colon in the file name is written `\:`).
    static func certificateArgument(_ argument: String) -> (file: String, passphrase: String?) {
        var file = ""
        var rest = Substring(argument)
        while let character = rest.first {
            rest = rest.dropFirst()
            if character == "\\", rest.first == ":" {
                file.append(":")
                rest = rest.dropFirst()
            } else if character == ":" {
                return (file, String(rest))
            } else {
                file.append(character)
            }
        }
        return (file, nil)
    }

    static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    var taskOptions: TaskOptions {
        get throws {
            var options = TaskOptions()
            options.session = session
            options.checksum = checksum
            options.sha256 = sha256
            options.title = title
            options.taskDescription = description
            if !mirrors.isEmpty { options.mirrors = mirrors }
            if !metadata.isEmpty {
                options.metadata = try Self.metadata(metadata, option: "--metadata").mapValues { .string($0) }
            }
            if let beginAt {
                do {
                    options.earliestBegin = try BeginTime.parse(beginAt)
                } catch {
                    throw ValidationError("\(error)")
                }
            }
            options.maxBytesPerSecond = limitRate?.bytes
            options.connections = connections
            if let priority {
                guard let value = TaskOptions.Priority(rawValue: priority) else {
                    throw ValidationError("--priority must be low, normal or high")
                }
                options.priority = value
            }
            if overwrite { options.overwrite = true }
            if noMetered { options.allowMetered = false }
            if requiresACPower { options.requiresACPower = true }
            options.desktopEntry = desktopEntry
            options.lowSpeedLimit = speedLimit?.bytes
            options.lowSpeedTime = speedTime
            if noProxy && proxy != nil { throw ValidationError("--proxy and --no-proxy exclude each other") }
            options.proxy = noProxy ? "direct://" : proxy
            if background { options.background = true }
            if !headers.isEmpty { options.headers = try Self.headers(headers) }
            if let pinnedPublicKeys {
                options.pinnedPublicKeys = pinnedPublicKeys.split(separator: ";").map { Self.trimmed($0) }
            }
            if trustPinnedOnly { options.trustPinnedOnly = true }
            options.referrer = referrer
            if noOriginAttributes { options.originAttributes = false }
            if share { options.share = true }
            if lanPeers { options.lanPeers = true }
            options.shareMaxAge = shareMaxAge
            options.shareLimit = shareLimit
            if let ifModifiedSince {
                do {
                    options.ifModifiedSince = try ModifiedSince.seconds(ifModifiedSince)
                } catch {
                    throw ValidationError("\(error)")
                }
            }
            options.ifNoneMatch = ifNoneMatch
            if let cert {
                let (file, phrase) = Self.certificateArgument(cert)
                options.clientCertificate = try ClientCertificateArgument.descriptor(certificate: file, key: key)
                options.clientCertificatePassphrase = passphrase ?? phrase
            } else if key != nil || passphrase != nil {
                throw ValidationError("--key and --pass go with --cert")
            }
            return options
        }
    }
}
