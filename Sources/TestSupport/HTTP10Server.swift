import Foundation

/// Python's `http.server` speaking HTTP/1.0 as many small servers do: it answers and closes
/// (`Tests/servers/http10_server.py`), and logs every request it took, with the bytes of the body
/// it read, before answering it. Its paths choose how it answers (see the script). `keepAlive`:
/// HTTP/1.1 instead, connections kept open (Python writes a response's head, then its body).
public final class HTTP10Server: @unchecked Sendable {
    public struct LoggedRequest: Sendable, Decodable, Equatable {
        public var method: String
        public var path: String
        public var length: Int
        public var read: Int
        public var key: String?
    }

    public let port: Int
    private let logPath: String
    private var process: ChildProcess?

    public init(in work: String, keepAlive: Bool = false) throws {
        port = try FreePort.pick()
        logPath = work + "/http10-\(port).log"
        process = try ChildProcess(
            ["/usr/bin/python3", PackageRoot.url.path + "/Tests/servers/http10_server.py", String(port), logPath]
                + (keepAlive ? ["keep-alive"] : [])
        )
        guard FreePort.waitUntilAccepting(port, by: process) else {
            stop()
            throw POSIXError(.ECONNREFUSED)
        }
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Every request the server took, in order.
    public var log: [LoggedRequest] {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONDecoder().decode(LoggedRequest.self, from: Data($0.utf8))
        }
    }

    public func requests(to path: String) -> [LoggedRequest] { log.filter { $0.path == path } }

    public func stop() {
        process?.stop()
        process = nil
    }

    deinit { stop() }
}
