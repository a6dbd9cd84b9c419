import Foundation

/// A machine of the local network offering one file by its SHA-256 on Passim's wire, well or as
/// an adversary (`Tests/servers/lan_peer.py`: its modes say how), over HTTPS with a self-signed
/// certificate as a peer's daemon makes. It logs every request it took with its headers.
public final class LANPeerServer: @unchecked Sendable {
    public enum Mode: String, Sendable {
        case good, wrong, stall, status, redirect, hugeheader, http10, passim
    }

    public struct LoggedRequest: Sendable, Decodable {
        public var path: String
        public var headers: [String: String]
        public var range: String?
    }

    public let port: Int
    private let logPath: String
    private var process: ChildProcess?

    /// Serves `file` from 127.0.0.1 in `mode` (`argument`: the status of `status`, the location
    /// of `redirect`).
    public init(in work: String, file: String, mode: Mode, argument: String = "") throws {
        port = try FreePort.pick()
        logPath = work + "/peer-\(port).log"
        let directory = work + "/peer-certificates-\(port)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificates = try TestCertificates(in: directory)
        process = try ChildProcess(
            [
                "/usr/bin/python3", PackageRoot.url.path + "/Tests/servers/lan_peer.py", String(port),
                certificates.selfSigned, certificates.serverKey, file, logPath, mode.rawValue, argument,
            ])
        guard FreePort.waitUntilAccepting(port, by: process) else {
            stop()
            throw POSIXError(.ECONNREFUSED)
        }
    }

    /// Passim's URL of the file here.
    public func url(name: String, sha256: String) -> String { "https://127.0.0.1:\(port)/\(name)?sha256=\(sha256)" }

    /// Every request the peer took, in order.
    public var log: [LoggedRequest] {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONDecoder().decode(LoggedRequest.self, from: Data($0.utf8))
        }
    }

    public func stop() {
        process?.stop()
        process = nil
    }

    deinit { stop() }
}
