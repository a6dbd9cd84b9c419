import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

extension DownloadError {
    /// Turns anything a transfer can throw into a `DownloadError`, by the error's type (never by
    /// its text): TLS errors are `TLSError` (not retried), parser errors `InvalidResponse`,
    /// timeouts `Timeout`, connection errors `NetworkError` and a body cut short `Interrupted`
    /// (both retried).
    static func classify(_ error: Error) -> DownloadError {
        switch error {
        case let error as DownloadError:
            return error
        case let error as HTTPClientError:
            switch error {
            case .connectTimeout: return .timeout("could not connect in time")
            case .deadlineExceeded, .readTimeout, .writeTimeout: return .timeout("\(error)")
            case .remoteConnectionClosed: return .interrupted("the connection closed early")
            default: return .network("\(error)")
            }
        case let error as NIOSSLError:
            return .tls("\(error)")
        case let error as BoringSSLError:
            return .tls("\(error)")
        case let error as NIOSSLExtraError:
            return .tls("\(error)")
        case let error as HTTPParserError:
            // The connection closed inside a body: an interruption (retried, resuming), not a bad server.
            if error == .invalidEOFState { return .interrupted("the connection closed before the body ended") }
            return .invalidResponse("malformed HTTP response: \(error)")
        case let error as NIOConnectionError:
            return .network("could not connect: \(error)")
        case let error as IOError:
            return .network("\(error)")
        case let error as ChannelError:
            return .network("\(error)")
        default:
            return .network("\(error)")
        }
    }
}
