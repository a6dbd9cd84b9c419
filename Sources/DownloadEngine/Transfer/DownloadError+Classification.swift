import AsyncHTTPClient
import DownloadModel
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ProxyRules

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
            // No address to try because the name did not resolve: say so, as curl's "Could not
            // resolve host" does, with the resolver's reason ("Name or service not known").
            if error.connectionErrors.isEmpty, let dns = error.dnsAError ?? error.dnsAAAAError {
                let why = (dns as? SocketAddressError.UnknownHost)?.errorDescription ?? "\(dns)"
                return .network("could not resolve \(error.host): \(why)")
            }
            let why = error.connectionErrors.first.map { reason($0.error) } ?? "no address to try"
            return .network("could not connect to \(error.host) port \(error.port): \(why)")
        case let error as IOError:
            return .network("the connection failed: \(reason(error))")
        case let error as ChannelError:
            return .network("\(error)")
        default:
            return .network("\(error)")
        }
    }

    /// Whether `error` is a connection that could not be made (refused, unreachable, timed out
    /// while connecting): nothing reached the server.
    static func isConnectFailure(_ error: Error) -> Bool {
        switch error {
        case is NIOConnectionError: return true
        case let error as HTTPClientError: return error == .connectTimeout
        case ChannelError.connectTimeout: return true
        case let error as IOError:
            return [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EADDRNOTAVAIL].contains(error.errnoCode)
        default: return false
        }
    }

    /// A connection's failure as a person reads it: the system's reason and errno for a system
    /// call's error. NIO's own text for one names the call's context rather than the cause (a
    /// refused connect reads "connection reset (error set): Connection refused) (errno: 111)",
    /// its stray parenthesis included).
    static func reason(_ error: Error) -> String {
        guard let error = error as? IOError else { return "\(error)" }
        return "\(errnoText(error.errnoCode)) (errno \(error.errnoCode))"
    }

    /// What a request through `proxy` failed with before any response, when it is the proxy's
    /// doing: it could not be reached, asked for credentials (407), refused the tunnel, or its
    /// SOCKS handshake failed. nil: not the proxy's (a TLS error inside the tunnel is the
    /// server's). Errors are told apart by type; SOCKS errors by their module (NIOSOCKS, which
    /// this package does not name).
    /// `headSent`: whether the request's head went out (then the tunnel was open, and a closed
    /// connection is the server's). Before it, a connection closed without a word, or an answer
    /// that is not HTTP, is the proxy's: TLS with the server reports its own errors.
    static func classify(
        _ error: Error, through proxy: ProxySetting, to host: String, headSent: Bool = true
    ) -> DownloadError? {
        if !headSent, case .http = proxy {
            if let error = error as? HTTPClientError, error == .remoteConnectionClosed {
                return .proxy(
                    "the proxy \(proxy) closed the connection instead of opening the tunnel to \(host) (an answer that is not HTTP, or none)"
                )
            }
            if error is HTTPParserError {
                return .proxy("the proxy \(proxy) answered with something that is not HTTP")
            }
        }
        switch error {
        case let error as HTTPClientError:
            switch error {
            case .proxyAuthenticationRequired:
                // A question the app may answer (`Challenge`, `proxy-auth`): AsyncHTTPClient keeps
                // the 407's head to itself, so its scheme is taken as Basic, the one it sends.
                return .proxy(
                    "the proxy \(proxy) asks for credentials (407 Proxy Authentication Required)"
                        + (proxy.hasCredentials ? "; it refused the ones given" : "")
                ).asking(
                    Challenge(kind: .proxyAuth, scheme: "Basic", realm: "", status: 407).at(proxy.description))
            case .invalidProxyResponse:
                return .proxy("the proxy \(proxy) refused the tunnel to \(host) (its CONNECT answer was not 2xx)")
            case .httpProxyHandshakeTimeout, .socksHandshakeTimeout:
                return .proxy("the proxy \(proxy) did not answer in time")
            case .connectTimeout:
                return .proxy("could not connect to the proxy \(proxy) in time")
            default:
                return nil
            }
        case let error as NIOConnectionError:
            return .proxy(
                "could not connect to the proxy \(proxy): \(error.connectionErrors.first.map { "\($0.error)" } ?? "connection failed")"
            )
        case ChannelError.connectTimeout:
            return .proxy("could not connect to the proxy \(proxy) in time")
        default:
            if String(reflecting: type(of: error)).hasPrefix("NIOSOCKS.") {
                return .proxy("the SOCKS proxy \(proxy) refused the connection to \(host): \(error)")
            }
            return nil
        }
    }
}
