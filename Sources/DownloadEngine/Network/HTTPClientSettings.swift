import AsyncHTTPClient
import DownloadModel
import NIOCore
import NIOSSL

/// The AsyncHTTPClient settings of every client the engine makes (`HTTPClients`), public so
/// that what measures against the engine (engine-bench's `http` and `file` layers) fetches with
/// exactly these rather than a copy.
public enum HTTPClientSettings {
    /// How long an unused connection (and a pinned or proxied client) is kept.
    public static let idleTimeout: TimeAmount = .seconds(60)

    /// The system store plus an administrator's `caFile`; certificate and host-name checks on.
    public static func tls(caFile: String?) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        // Closing a TLS connection sends close_notify and waits for the server's; until then
        // NIOSSL reads (and drops) whatever still arrives. A segment's request ended mid-body
        // went on receiving the server's bytes for NIOSSL's default 5 s: at 2 MB/s, 10 MB of
        // one 16 MiB download fetched twice. A server still sending will not answer in time.
        tls.shutdownTimeout = .milliseconds(200)
        return tls
    }

    /// - Parameters:
    ///   - http1Only: HTTP/1.1 only (`HTTPClients.Kind.separate`, and `.multiplexed` unless the
    ///     daemon offers HTTP/2), else HTTP/2 when the server takes it (ALPN).
    ///   - connectionsPerHost: HTTP/1.1 connections one client opens to one host at once.
    public static func configuration(
        http1Only: Bool, tls: TLSConfiguration, connectTimeout: Double, connectionsPerHost: Int, idleTimeout: TimeAmount
    ) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.tlsConfiguration = tls
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .milliseconds(Int64(connectTimeout * 1000)))
        configuration.decompression = .disabled
        // The engine retries with its own policy (back-off, Retry-After, a task's state says
        // `retrying`); the pool's own retries would hide a refused connection or a certificate
        // that will never verify behind the whole connect timeout.
        configuration.connectionPool = .init(
            idleTimeout: idleTimeout, concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, connectionsPerHost)
        )
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = http1Only ? .http1Only : .automatic
        return configuration
    }
}
