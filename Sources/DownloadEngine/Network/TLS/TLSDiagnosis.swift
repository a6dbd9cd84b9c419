import DownloadModel
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import ProxyRules
import TerminalOutput
import ShownText

/// Why a TLS handshake failed, in words a person can act on. BoringSSL reports every failed
/// verification as one `CERTIFICATE_VERIFY_FAILED`; after a failure the engine connects again
/// (to the same address, so `--deny-network` pins hold) and finds out which check failed:
///
/// 1. a handshake that checks nothing: if even that fails, the server does not speak TLS, or
///    closed the connection during the handshake;
/// 2. the server's certificate's dates: expired, or not valid yet;
/// 3. the chain without the host name: an issuer this system does not trust;
/// 4. otherwise the certificate is not issued for the host name.
///
/// Nothing read here is trusted or kept: the connections carry no request and are closed.
enum TLSDiagnosis {
    /// What the handshakes found: why, in words, and the chain the server presented.
    struct Explanation {
        let text: String
        /// DER, the server's own certificate first.
        var chain: [[UInt8]] = []
        /// The server's own certificate is self-signed and within its dates: what an app may trust
        /// by its key (`server-trust`, `trust_pinned_only`).
        var selfSigned = false
    }

    /// What the certificate and handshakes showed (`nil`: the failure did not happen again).
    static func explain(
        host: String, port: Int, address: String?, configuration: TLSConfiguration, timeout: TimeAmount
    ) async -> Explanation? {
        let first: TLSProbe.Handshake
        do {
            first = try await TLSProbe.handshake(
                host: host, port: port, address: address, configuration: configuration, timeout: timeout,
                presented: true)
        } catch {
            return Explanation(text: handshakeFailure(error, at: "\(host):\(port)"))
        }
        guard let certificate = first.chain.first ?? first.certificate else {
            return Explanation(text: "the server at \(host):\(port) sent no certificate")
        }
        let chain = first.chain.compactMap { try? $0.toDERBytes() }
        let now = time(nil)
        if certificate.notValidAfter < now {
            return Explanation(
                text: "the server's certificate for \(host) expired on \(date(certificate.notValidAfter))", chain: chain
            )
        }
        if certificate.notValidBefore > now {
            return Explanation(
                text:
                    "the server's certificate for \(host) is not valid before \(date(certificate.notValidBefore)); check this computer's clock",
                chain: chain)
        }
        var chainOnly = configuration
        chainOnly.certificateVerification = .noHostnameVerification
        do {
            _ = try await TLSProbe.handshake(
                host: host, port: port, address: address, configuration: chainOnly, timeout: timeout)
        } catch {
            let issuer = name(certificate.issuerName)
            // Its own issuer: a test or home server's certificate, which no CA vouches for.
            if certificate.issuerName == certificate.subjectName {
                return Explanation(
                    text:
                        "the server's certificate for \(host) is self-signed (\(issuer)), which this system does not trust"
                        + " (trust it for this service alone with downloadsd --ca-file, or for the system with update-ca-certificates)",
                    chain: chain, selfSigned: true)
            }
            return Explanation(
                text: "the server's certificate for \(host) is issued by \(issuer), which this system does not trust"
                    + " (an organisation's CA is added with update-ca-certificates)", chain: chain)
        }
        do {
            _ = try await TLSProbe.handshake(
                host: host, port: port, address: address, configuration: configuration, timeout: timeout)
            return nil
        } catch {
            return Explanation(
                text:
                    "the server's certificate is not issued for the host name \(host) (its subject is \(name(certificate.subjectName)))",
                chain: chain)
        }
    }

    /// Why a handshake that checks nothing still failed.
    private static func handshakeFailure(_ error: Error, at server: String) -> String {
        switch error {
        case ChannelError.ioOnClosedChannel, ChannelError.eof, NIOSSLError.uncleanShutdown:
            return "the server at \(server) closed the connection during the TLS handshake"
        case ChannelError.connectTimeout:
            return "the server at \(server) did not answer the TLS handshake in time"
        case NIOSSLError.handshakeFailed(.sslError(let errors)) where errors.contains(.eofDuringHandshake):
            return "the server at \(server) closed the connection during the TLS handshake"
        case NIOSSLError.handshakeFailed(.sslError(let errors)):
            return "the TLS handshake with \(server) failed: " + errors.map { reason(of: $0) }.joined(separator: "; ")
        default:
            return "the TLS handshake with \(server) failed: \(error)"
        }
    }

    /// BoringSSL's reason (`…:OPENSSL_internal:WRONG_VERSION_NUMBER at file:line`), in words
    /// for the common ones. Only wording: errors are classified by type, never by this text.
    private static func reason(of error: BoringSSLInternalError) -> String {
        let text = "\(error)"
        guard let marker = text.range(of: "OPENSSL_internal:") else { return text }
        let tail = text[marker.upperBound...]
        let name = String(tail.split(separator: " ").first ?? tail)
        switch name {
        case "WRONG_VERSION_NUMBER": return "the server does not speak TLS on this port (plain HTTP?)"
        case "TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL": return "no TLS version in common"
        case "SSLV3_ALERT_HANDSHAKE_FAILURE", "NO_SHARED_CIPHER": return "no TLS version or cipher in common"
        default: return name
        }
    }

    /// The alert a server ended the handshake with when it may be for want of a client
    /// certificate: `certificate_required` (TLS 1.3) or `handshake_failure` (TLS 1.2 after a
    /// `CertificateRequest`), from BoringSSL's reason names (the only place NIOSSL gives them);
    /// nil for any other failure.
    static func clientCertificateAlert(_ error: Error) -> String? {
        guard case NIOSSLError.handshakeFailed(.sslError(let errors)) = error else {
            // A TLS 1.3 client has sent its request when the server's alert comes: a read fails.
            if let error = error as? BoringSSLError, case .sslError(let errors) = error {
                return clientCertificateAlert(in: errors)
            }
            return nil
        }
        return clientCertificateAlert(in: errors)
    }

    private static func clientCertificateAlert(in errors: [BoringSSLInternalError]) -> String? {
        for error in errors {
            let text = "\(error)"
            if text.contains("TLSV1_ALERT_CERTIFICATE_REQUIRED") { return Challenge.certificateRequiredAlert }
            if text.contains("SSLV3_ALERT_HANDSHAKE_FAILURE") || text.contains("SSLV3_ALERT_BAD_CERTIFICATE") {
                return "handshake_failure"
            }
        }
        return nil
    }

    static func name(_ names: [SSLCertificateName]) -> String {
        let common = names.first { $0.type == .commonName }?.value
        let organization = names.first { $0.type == .organization }?.value
        let text = [common.map { "CN=\($0)" }, organization.map { "O=\($0)" }].compactMap { $0 }.joined(separator: ", ")
        return text.isEmpty ? "an unnamed issuer" : "“\(DisplayText.quoted(text, limit: 80))”"
    }

    private static func date(_ seconds: time_t) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
