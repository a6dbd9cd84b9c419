import Foundation

/// nginx (Debian's, with `ssl` and `http2`) on 127.0.0.1 and ::1 serving `www` over TLS with the
/// certificates of `TestCertificates`, one port per kind of site, for tests of HTTPS as users meet
/// it. Each site serves `/` as fast as it can, `/limited/` at `limitRate` bytes a second per
/// request, and `/redirect/NAME` with a 302 to `https://localhost:<http1 port>/NAME` (another
/// host and port), `/elsewhere/NAME` likewise to the `certificateOptional` site. Every request is logged with nginx's connection serial number, so a test
/// counts the TCP connections a download really opened. `/private/NAME` asks for a login
/// (`auth_basic`, `user` and `password`).
public final class TLSTestServer: @unchecked Sendable {
    public enum Site: String, CaseIterable, Sendable {
        /// HTTP/2 and HTTP/1.1 (ALPN), the good certificate.
        case http2
        /// HTTP/1.1 only, the good certificate.
        case http1
        /// HTTP/2 on [::1].
        case ipv6
        /// A certificate from a CA nobody trusts.
        case untrusted
        /// A self-signed certificate (its own issuer), as a test or home server has.
        case selfSigned
        /// A certificate that expired in 2020.
        case expired
        /// A certificate for other.example.
        case otherHost
        /// The good certificate; it asks every client for a certificate from the test CA
        /// (`ssl_verify_client on`: nginx answers a request without one `400`).
        case clientCertificate
        /// The good certificate; it asks every client for a certificate and serves one without
        /// (`ssl_verify_client optional_no_ca`): the log says whether one was presented.
        case certificateOptional
    }

    /// One line of the access log.
    public struct Request: Sendable {
        public let connection: Int
        public let port: Int
        public let path: String
        public let status: Int
        /// `HTTP/2.0` or `HTTP/1.1`.
        public let httpVersion: String
        /// The connection's TLS version as nginx names it (`TLSv1.2`, `TLSv1.3`).
        public let tlsVersion: String
        public let range: String?
        /// Body bytes nginx sent.
        public let bodyBytes: Int
        /// The SHA-1 fingerprint of the client certificate presented, nil when none was.
        public let clientCertificate: String?
    }

    public let certificates: TestCertificates
    public let www: String
    public let limitRate: Int
    private let work: String
    private let ports: [Site: Int]
    private var process: ChildProcess?

    public init(in work: String, limitRate: Int = 2_000_000) throws {
        self.work = work
        self.limitRate = limitRate
        www = work + "/www"
        // `PUT /put/NAME` stores an upload as `www/put/NAME` (nginx's dav module).
        try FileManager.default.createDirectory(atPath: www + "/put", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: work + "/certificates", withIntermediateDirectories: true)
        certificates = try TestCertificates(in: work + "/certificates")
        var ports: [Site: Int] = [:]
        for site in Site.allCases { ports[site] = try FreePort.pick(ipv6: site == .ipv6) }
        self.ports = ports
        try config().write(toFile: work + "/nginx.conf", atomically: true, encoding: .utf8)
        try "\(Self.user):{PLAIN}\(Self.password)\n".write(
            toFile: work + "/htpasswd", atomically: true, encoding: .utf8)
        process = try ChildProcess([
            "/usr/sbin/nginx", "-c", work + "/nginx.conf", "-p", work, "-e", work + "/error.log",
        ])
        // Ready when every port answers a TCP connection.
        let deadline = Date().addingTimeInterval(20)
        while !Site.allCases.allSatisfy({ FreePort.accepts(port: self.port($0), ipv6: $0 == .ipv6) }) {
            guard Date() < deadline, process?.hasExited == false else {
                let log = (try? String(contentsOfFile: work + "/error.log", encoding: .utf8)) ?? ""
                stop()
                throw POSIXError(.EIO, userInfo: [NSLocalizedDescriptionKey: "nginx did not start: \(log)"])
            }
            usleep(20_000)
        }
    }

    public func port(_ site: Site) -> Int { ports[site] ?? 0 }

    /// `/private/NAME` serves `www/NAME` to `user` with `password` alone (nginx's `auth_basic`,
    /// a 401 with `WWW-Authenticate: Basic realm="…"` to anyone else).
    public static let realm = "Downloads test"
    public static let user = "alice"
    public static let password = "pa55-Secret-7"

    /// `https://HOST:PORT/PATH` of `site` (`host` defaults to localhost, [::1] for `.ipv6`).
    public func url(_ site: Site, _ path: String, host: String? = nil) -> String {
        "https://\(host ?? (site == .ipv6 ? "[::1]" : "localhost")):\(port(site))\(path)"
    }

    /// Writes `content` as `www/NAME`.
    public func file(_ name: String, _ content: [UInt8]) throws {
        try Data(content).write(to: URL(fileURLWithPath: www + "/" + name))
    }

    /// Every request logged so far (nginx writes a line once a request has ended).
    public var requests: [Request] {
        let text = (try? String(contentsOfFile: work + "/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 10, let connection = Int(fields[0]), let port = Int(fields[1]),
                let status = Int(fields[3])
            else {
                return nil
            }
            return Request(
                connection: connection, port: port, path: fields[2], status: status, httpVersion: fields[4],
                tlsVersion: fields[8], range: fields[5] == "-" ? nil : fields[5], bodyBytes: Int(fields[6]) ?? 0,
                clientCertificate: ["-", ""].contains(fields[9]) ? nil : fields[9]
            )
        }
    }

    public func requests(for path: String, on site: Site) -> [Request] {
        requests.filter { $0.path == path && $0.port == port(site) }
    }

    public func stop() {
        process?.stop()
        process = nil
    }

    deinit { stop() }

    private func config() -> String {
        let c = certificates
        func server(_ site: Site, certificate: String, http2: Bool) -> String {
            let address = site == .ipv6 ? "[::1]" : "127.0.0.1"
            let verify =
                switch site {
                case .clientCertificate: "ssl_verify_client on; ssl_client_certificate \(c.caFile);"
                case .certificateOptional: "ssl_verify_client optional_no_ca;"
                default: ""
                }
            return """
                  server {
                    listen \(address):\(port(site)) ssl\(http2 ? " http2" : "");
                    ssl_certificate \(certificate); ssl_certificate_key \(c.serverKey); \(verify)
                    root \(www);
                    location /limited/ { alias \(www)/; limit_rate \(limitRate); }
                    location /redirect/ { rewrite ^/redirect/(.*)$ https://localhost:\(port(.http1))/$1 redirect; }
                    location /elsewhere/ { rewrite ^/elsewhere/(.*)$ https://localhost:\(port(.certificateOptional))/$1 redirect; }
                    location /private/ { alias \(www)/; auth_basic "\(Self.realm)"; auth_basic_user_file \(work)/htpasswd; }
                    location /put/ { alias \(www)/put/; dav_methods PUT; create_full_put_path on; client_max_body_size 0; }
                  }

                """
        }
        return """
            daemon off; master_process off; worker_processes 1; pid \(work)/nginx.pid; error_log \(work)/error.log;
            events { worker_connections 1024; }
            http {
              log_format tests '$connection $server_port $uri $status $server_protocol $http_range $body_bytes_sent $request_time $ssl_protocol $ssl_client_fingerprint';
              access_log \(work)/access.log tests;
              sendfile on; keepalive_requests 100000; http2_max_concurrent_streams 128;
              client_body_temp_path \(work); proxy_temp_path \(work); fastcgi_temp_path \(work); uwsgi_temp_path \(work); scgi_temp_path \(work);
            \(server(.http2, certificate: c.good, http2: true))\(server(.http1, certificate: c.good, http2: false))\(server(.ipv6, certificate: c.good, http2: true))\(server(.untrusted, certificate: c.untrusted, http2: true))\(server(.selfSigned, certificate: c.selfSigned, http2: true))\(server(.expired, certificate: c.expired, http2: true))\(server(.otherHost, certificate: c.otherHost, http2: true))\(server(.clientCertificate, certificate: c.good, http2: true))\(server(.certificateOptional, certificate: c.good, http2: true))}

            """
    }
}
