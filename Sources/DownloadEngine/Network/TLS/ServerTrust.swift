import Crypto
import DownloadModel
import Foundation
import NIOCore
import NIOSSL

/// What a task trusts of one TLS server beyond the system's store: its pinned keys
/// (`pinned_public_keys`, curl's `--pinnedpubkey`) and a self-signed certificate it trusts by
/// its key (`trust_pinned_only`, or its app's `server-trust` answer).
///
/// AsyncHTTPClient offers no hook into a connection's certificate check, so the server is
/// looked at first on a handshake of its own (`TLSProbe`, same address, nothing sent):
/// - a certificate trusted by its key becomes the request's only trust root (and the host name
///   is not checked): the request's own connection then succeeds only with a server holding
///   that very certificate's key, whatever the probe saw;
/// - a pin besides the system's checks is checked on the probe's certificate, which passed
///   those checks; the request's connection is checked again by the system's store (a server
///   that switched certificates between the two handshakes would need one this system trusts).
enum ServerTrust {
    /// The TLS configuration of a request to `host`:`port` (nil: the client's own), or why the
    /// server is refused.
    static func configuration(
        for rules: SourceRules, base: TLSConfiguration, host: String, port: Int, address: String?, timeout: TimeAmount
    ) async -> Result<TLSConfiguration?, DownloadError> {
        let trustedCertificate = rules.trusted?.certificate
        let pins = Set(rules.pinnedPublicKeys.compactMap(DownloadOptions.pinnedKeyDigest))
        guard !pins.isEmpty || trustedCertificate != nil else { return .success(nil) }
        let byKeyOnly = rules.trustPinnedOnly || trustedCertificate != nil
        let handshake: TLSProbe.Handshake
        do {
            handshake = try await TLSProbe.handshake(
                host: host, port: port, address: address, configuration: base, timeout: timeout, presented: byKeyOnly)
        } catch {
            let failure = DownloadError.classify(error)
            guard failure.code == .tlsError else { return .failure(failure) }
            let why = await TLSDiagnosis.explain(
                host: host, port: port, address: address, configuration: base, timeout: timeout)
            return .failure(why.map { RequestSender.failure(explained: $0) } ?? failure)
        }
        guard let leaf = byKeyOnly ? handshake.chain.first : handshake.certificate,
            let der = try? leaf.toDERBytes(), let key = try? leaf.extractPublicKey().toSPKIBytes()
        else {
            return .failure(.tls("the server at \(host):\(port) sent no certificate"))
        }
        let pin = "sha256//" + Data(SHA256.hash(data: key)).base64EncodedString()
        if !pins.isEmpty, !pins.contains(Array(SHA256.hash(data: key))) {
            return .failure(
                .tls(
                    "the public key of the server at \(host):\(port) (\(pin)) is not one of the task's pinned_public_keys"
                ))
        }
        if let trustedCertificate, pins.isEmpty, der != trustedCertificate {
            // Another certificate than the one the app trusted: asked again (a refused answer).
            let chain = handshake.chain.compactMap { try? $0.toDERBytes() }
            return .failure(
                DownloadError.tls(
                    "the server at \(host):\(port) presents another certificate than the one its app trusted"
                )
                .asking(.serverTrust(chain: chain, error: "its certificate changed since the app trusted it")))
        }
        guard byKeyOnly else { return .success(nil) }
        guard leaf.issuerName == leaf.subjectName else {
            return .failure(
                .tls(
                    "the server's certificate for \(host) is issued by \(TLSDiagnosis.name(leaf.issuerName)): only a self-signed certificate is trusted by its key (add the issuer with downloadsd --ca-file)"
                ))
        }
        var configuration = base
        configuration.trustRoots = .certificates([leaf])
        configuration.additionalTrustRoots = []
        configuration.certificateVerification = .noHostnameVerification
        return .success(configuration)
    }
}
