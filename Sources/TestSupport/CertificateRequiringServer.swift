import Foundation

/// A TLS server no one here wrote that ends the handshake when a client presents no certificate
/// from the test CA, where nginx finishes it and answers `400`: Apache httpd with
/// `SSLVerifyClient require` (`apache2-bin`'s mod_ssl), or Python's `ssl` with `CERT_REQUIRED`
/// under `http.server`. With TLS 1.3 the server's alert is `certificate_required`; limited to
/// TLS 1.2 it is `handshake_failure`, after a `CertificateRequest` a client reads in clear. Serves
/// `www/NAME` at `https://localhost:PORT/NAME` with the certificates of `TestCertificates`.
public final class CertificateRequiringServer: @unchecked Sendable {
    public enum Kind: String, Sendable { case apache, python }

    public let kind: Kind
    public let port: Int
    /// What it serves (readable by Apache's `nobody`).
    public let www: String
    private let directory: String
    private var process: ChildProcess?

    /// `alertOnly` (Python only): a server that asks for no certificate and answers every
    /// ClientHello with a fatal `handshake_failure` alert, as one that wanted a certificate ends
    /// its handshake: a server that only looks like one.
    public init(
        _ kind: Kind, certificates: TestCertificates, tls12Only: Bool = false, alertOnly: Bool = false
    ) throws {
        self.kind = kind
        port = try FreePort.pick()
        // Apache serves as `nobody`, who must reach the tree: one of its own in /tmp.
        directory = "/tmp/mtls-\(kind.rawValue)-\(port)-\(getpid())"
        www = directory + "/www"
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        chmod(www, 0o755)
        let arguments: [String]
        switch kind {
        case .apache:
            let binary = "/usr/sbin/apache2", modules = "/usr/lib/apache2/modules"
            guard FileManager.default.fileExists(atPath: modules + "/mod_ssl.so") else {
                throw WebDAVServer.Unavailable(description: "apache2-bin with mod_ssl is not installed: run make deps")
            }
            let config = directory + "/server.conf"
            try """
            ServerRoot "\(directory)"
            ServerName localhost
            Listen 127.0.0.1:\(port)
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule ssl_module \(modules)/mod_ssl.so
            PidFile "\(directory)/httpd.pid"
            ErrorLog "\(directory)/error.log"
            User nobody
            Group nogroup
            DocumentRoot "\(www)"
            SSLEngine on
            SSLProtocol \(tls12Only ? "-all +TLSv1.2" : "-all +TLSv1.2 +TLSv1.3")
            SSLCertificateFile "\(certificates.good)"
            SSLCertificateKeyFile "\(certificates.serverKey)"
            SSLCACertificateFile "\(certificates.caFile)"
            SSLVerifyClient require
            SSLVerifyDepth 2
            <Directory "\(www)">
              Require all granted
            </Directory>
            """.write(toFile: config, atomically: true, encoding: .utf8)
            arguments = [binary, "-DFOREGROUND", "-f", config]
        case .python:
            let script = """
                import http.server, os, ssl
                os.chdir('\(www)')
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain('\(certificates.good)', '\(certificates.serverKey)')
                context.load_verify_locations('\(certificates.caFile)')
                context.verify_mode = ssl.CERT_REQUIRED
                \(tls12Only ? "context.maximum_version = ssl.TLSVersion.TLSv1_2" : "")
                class Quiet(http.server.SimpleHTTPRequestHandler):
                    def log_message(self, *args): pass
                server = http.server.ThreadingHTTPServer(('127.0.0.1', \(port)), Quiet)
                server.socket = context.wrap_socket(server.socket, server_side=True)
                server.serve_forever()
                """
            let alerting = """
                import socket, threading
                listener = socket.create_server(('127.0.0.1', \(port)))
                def answer(connection):
                    with connection:
                        connection.recv(65536)
                        connection.sendall(bytes([21, 3, 3, 0, 2, 2, 40]))
                while True:
                    threading.Thread(target=answer, args=(listener.accept()[0],), daemon=True).start()
                """
            arguments = ["/usr/bin/python3", "-c", alertOnly ? alerting : script]
        }
        process = try ChildProcess(arguments)
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, process?.hasExited == false else {
                let log = (try? String(contentsOfFile: directory + "/error.log", encoding: .utf8)) ?? ""
                stop()
                throw WebDAVServer.Unavailable(description: "\(kind.rawValue) did not start: \(log)")
            }
            usleep(20_000)
        }
    }

    /// Writes `content` as `www/NAME`, readable by the server.
    public func file(_ name: String, _ content: [UInt8]) throws {
        let path = www + "/" + name
        try Data(content).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
    }

    /// `https://localhost:PORT/NAME`.
    public func url(_ name: String) -> String { "https://localhost:\(port)/\(name)" }

    public func stop() {
        process?.stop()
        process = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}
