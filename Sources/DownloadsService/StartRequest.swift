import DBus
import DownloadEngine
import Foundation

/// The arguments of `Start` (and the options of `ResumeWithData`), validated strictly: unknown
/// keys, wrong types, relative paths and non-http(s) URLs are `InvalidArgument` with a reason.
struct StartRequest {
    var url: String
    var destination: String
    var session = "default"
    var options = DownloadOptions()

    static let startKeys: Set<String> = [
        "session", "headers", "sha256", "priority", "max_bytes_per_second", "connections", "overwrite",
        "allow_metered", "connect_timeout", "stall_timeout", "resource_timeout",
    ]
    static let resumeKeys: Set<String> = ["priority", "max_bytes_per_second", "allow_metered"]

    init(url: String, destination: String, options dict: [String: DBusValue]) throws {
        self.url = try StartRequest.checkURL(url)
        self.destination = try StartRequest.checkDestination(destination)
        try apply(dict, allowed: StartRequest.startKeys)
    }

    static func checkURL(_ text: String) throws -> String {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            throw ServiceError.invalidArgument("'\(text)' is not a URL")
        }
        guard scheme == "http" || scheme == "https" else {
            throw ServiceError.invalidArgument("only http and https URLs can be downloaded, not '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else { throw ServiceError.invalidArgument("the URL has no host") }
        guard !text.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 32 } == true }) else {
            throw ServiceError.invalidArgument("the URL contains spaces or control characters")
        }
        return text
    }

    static func checkDestination(_ path: String) throws -> String {
        guard path.hasPrefix("/") else {
            throw ServiceError.invalidArgument("destination must be an absolute path, got '\(path)'")
        }
        guard !path.split(separator: "/").contains(".."), !path.utf8.contains(0) else {
            throw ServiceError.invalidArgument("destination must not contain '..'")
        }
        return path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    static func session(_ value: DBusValue) throws -> String {
        guard let session = value.stringValue, case .string = value else {
            throw ServiceError.invalidArgument("option 'session' must be a string (s)")
        }
        guard !session.isEmpty, session.count <= 255 else {
            throw ServiceError.invalidArgument("session must be 1 to 255 characters")
        }
        return session
    }

    mutating func apply(_ dict: [String: DBusValue], allowed: Set<String>) throws {
        for (key, value) in dict.sorted(by: { $0.key < $1.key }) {
            guard allowed.contains(key) else {
                throw ServiceError.invalidArgument(
                    "unknown option '\(key)' (known: \(allowed.sorted().joined(separator: ", ")))"
                )
            }
            func wrongType(_ signature: String) -> BusError {
                ServiceError.invalidArgument("option '\(key)' must be of type \(signature), got \(value.type.signature)")
            }
            switch key {
            case "session": session = try StartRequest.session(value)
            case "headers":
                guard let headers = value.stringDictValue else { throw wrongType("a{ss}") }
                options.headers = headers
            case "sha256":
                guard case .string(let text) = value else { throw wrongType("s") }
                options.sha256 = text.lowercased()
            case "priority":
                guard case .string(let text) = value else { throw wrongType("s") }
                guard let priority = DownloadOptions.Priority(rawValue: text) else {
                    throw ServiceError.invalidArgument("priority must be low, normal or high")
                }
                options.priority = priority
            case "max_bytes_per_second":
                guard case .uint64(let rate) = value else { throw wrongType("t") }
                options.maxBytesPerSecond = rate
            case "connections":
                guard case .uint32(let count) = value else { throw wrongType("u") }
                guard count == 1 else {
                    throw ServiceError.invalidArgument("connections: only 1 connection per download is supported")
                }
            case "overwrite":
                guard case .boolean(let flag) = value else { throw wrongType("b") }
                options.overwrite = flag
            case "allow_metered":
                guard case .boolean = value else { throw wrongType("b") }
            case "connect_timeout", "stall_timeout", "resource_timeout":
                let seconds: Double
                switch value {
                case .uint32(let v): seconds = Double(v)
                case .double(let v): seconds = v
                default: throw wrongType("u or d (seconds)")
                }
                if key == "connect_timeout" { options.connectTimeout = seconds }
                if key == "stall_timeout" { options.stallTimeout = seconds }
                if key == "resource_timeout" { options.resourceTimeout = seconds }
            default:
                throw ServiceError.invalidArgument("unknown option '\(key)'")
            }
        }
        do {
            try options.validate()
        } catch let error as DownloadError {
            throw ServiceError.bus(error)
        }
    }
}
