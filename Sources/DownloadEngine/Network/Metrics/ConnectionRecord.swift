import DownloadModel
import NIOCore
import NIOSSL
import Synchronization

/// One connection of AsyncHTTPClient's pool, as `ConnectionWatch` saw it once the pool had made
/// it: when it was ready, its peer and TLS version, and how many requests went on it, so each
/// request learns whether it was the first (`ConnectionUse`).
final class ConnectionRecord: Sendable {
    let readyAt: Int64
    let remoteAddress: String?
    let tlsVersion: String?
    let proxied: Bool
    /// Requests that went on it so far (an atomic counter, no lock: h2 streams of one connection
    /// share it).
    private let served = Atomic<Int>(0)

    /// Read on the channel's event loop, as the pool's debug initializer runs.
    init(channel: Channel, proxied: Bool) {
        readyAt = TaskMetrics.now
        remoteAddress = channel.remoteAddress?.ipAddress
        let tls = try? channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
        tlsVersion = tls?.tlsVersion.map(Self.name(of:))
        self.proxied = proxied
    }

    /// The next request's use of it.
    func use() -> ConnectionUse {
        let earlier = served.wrappingAdd(1, ordering: .relaxed).oldValue
        return ConnectionUse(
            reused: earlier > 0, remoteAddress: remoteAddress, tlsVersion: tlsVersion, connectStart: nil,
            readyAt: earlier == 0 && !proxied ? readyAt : nil)
    }

    /// OpenSSL's and curl's names.
    static func name(of version: TLSVersion) -> String {
        switch version {
        case .tlsv1: return "TLSv1"
        case .tlsv11: return "TLSv1.1"
        case .tlsv12: return "TLSv1.2"
        case .tlsv13: return "TLSv1.3"
        }
    }
}
