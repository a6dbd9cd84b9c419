import Crypto
import Foundation

/// A tus 1.0.0 server: PyPI's `resumable-upload` 0.3.0 (installed by `make deps` into
/// `.build/python`), its `serve` command on 127.0.0.1 through `Tests/tus/tus_server.py`, which
/// logs every answered request (method, path, `Upload-Offset`, `Content-Length`, status). It
/// speaks creation, creation-with-upload, checksum (sha1, sha256), expiration and termination,
/// and keeps nothing of a `PATCH` that was cut: a part counts once it is answered.
public final class TusServer: @unchecked Sendable {
    public struct LoggedRequest: Sendable, Decodable, CustomStringConvertible {
        public var method: String
        public var path: String
        public var offset: String?
        public var length: String?
        public var checksum: String?
        public var status: Int
        public var description: String {
            "\(method) \(path) offset=\(offset ?? "-") length=\(length ?? "-") → \(status)"
        }
    }

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    public let port: Int
    public let directory: String
    private var process: ChildProcess?

    /// Where `make deps` installs the server.
    public static var pythonPath: String { PackageRoot.url.path + "/.build/python" }

    /// `options`: more of `serve`'s options (`--upload-expiry 2`, `--checksum-algorithms sha1`).
    public init(in work: String, options: [String] = ["--checksum-algorithms", "sha1,sha256"]) throws {
        guard FileManager.default.fileExists(atPath: Self.pythonPath + "/resumable_upload") else {
            throw Unavailable(description: "resumable-upload is not installed in \(Self.pythonPath): run make deps")
        }
        port = try FreePort.pick()
        directory = work + "/tus-\(port)"
        try FileManager.default.createDirectory(atPath: directory + "/uploads", withIntermediateDirectories: true)
        let script = PackageRoot.url.path + "/Tests/tus/tus_server.py"
        process = try ChildProcess(
            [
                "/usr/bin/python3", script, directory + "/requests.log", "serve", "--host", "127.0.0.1", "--port",
                String(port),
                "--upload-dir", directory + "/uploads", "--db-path", directory + "/uploads.db", "--log-level",
                "WARNING",
            ] + options,
            environment: ["PYTHONPATH": Self.pythonPath]
        )
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, process?.hasExited == false else {
                stop()
                throw Unavailable(description: "the tus server did not start")
            }
            usleep(20_000)
        }
    }

    /// The tus endpoint.
    public var url: String { "http://127.0.0.1:\(port)/files" }

    public var log: [LoggedRequest] {
        guard let text = try? String(contentsOfFile: directory + "/requests.log", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONDecoder().decode(LoggedRequest.self, from: Data($0.utf8))
        }
    }

    /// The SHA-256 (hex) of each upload the server holds, by its id (the resource's last path part).
    public var files: [String: String] {
        let uploads = directory + "/uploads"
        var result: [String: String] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: uploads)) ?? [] {
            guard let data = FileManager.default.contents(atPath: uploads + "/" + name) else { continue }
            result[name] = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
        }
        return result
    }

    public func stop() {
        process?.stop()
        process = nil
    }

    deinit { stop() }
}
