import Foundation

/// tinyproxy (Debian's) on 127.0.0.1 as an office's HTTP proxy: it tunnels with CONNECT (to any
/// port unless `connectPorts` limits them, as Debian's default configuration limits them to 443
/// and 563), asks for Basic credentials when `credentials` is set (407 without them), and logs
/// every request, so a test sees which tunnels a download opened.
public final class TinyProxy: @unchecked Sendable {
    public let port: Int
    public let log: String
    private var process: ChildProcess?

    public init(in work: String, credentials: (user: String, password: String)? = nil, connectPorts: [Int] = []) throws
    {
        port = try FreePort.pick()
        log = work + "/tinyproxy-\(port).log"
        var config = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            MaxClients 200
            LogFile "\(log)"
            LogLevel Connect
            PidFile "\(work)/tinyproxy-\(port).pid"
            Allow 127.0.0.1
            DisableViaHeader Yes

            """
        if let credentials { config += "BasicAuth \(credentials.user) \(credentials.password)\n" }
        for connectPort in connectPorts { config += "ConnectPort \(connectPort)\n" }
        let path = work + "/tinyproxy-\(port).conf"
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        process = try ChildProcess(["/usr/bin/tinyproxy", "-d", "-c", path])
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, process?.hasExited == false else {
                stop()
                throw POSIXError(.EIO, userInfo: [NSLocalizedDescriptionKey: "tinyproxy did not start: \(logText)"])
            }
            usleep(20_000)
        }
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    public var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// The tunnels the proxy was asked for (`CONNECT host:port`), in order.
    public var connectRequests: [String] {
        logText.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "): CONNECT ") else { return nil }
            return line[range.upperBound...].split(separator: " ").first.map(String.init)
        }
    }

    /// The requests the proxy forwarded (`GET http://host:port/path`: the absolute URLs), in order.
    public var forwardedRequests: [String] { forwarded("GET") }

    /// The requests of `method` the proxy forwarded (their absolute URLs), in order.
    public func forwarded(_ method: String) -> [String] {
        logText.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "): \(method) ") else { return nil }
            return line[range.upperBound...].split(separator: " ").first.map(String.init)
        }
    }

    public func stop() {
        process?.stop()
        process = nil
    }
}
