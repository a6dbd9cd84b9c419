import DownloadModel
import NIOSSL

/// A client certificate as TLS gives it: the chain and the private key a PEM file holds
/// (`ClientCertificate`). PKCS#12 is not read: NIOSSL's reader stops the process on a file that
/// parses but holds no key, which a caller's file must never be able to do.
public enum ClientIdentity {
    /// The certificates, the first the client's own, and its key; throws a reason a person can act on.
    static func load(
        _ certificate: ClientCertificate
    ) throws(DownloadError) -> (
        chain: [NIOSSLCertificate], key: NIOSSLPrivateKey
    ) {
        guard certificate.isPEM else {
            throw .invalidArgument(
                "client_certificate must be a PEM file holding the certificate and its private key (convert a PKCS#12 file with openssl pkcs12 -in FILE.p12 -out FILE.pem)"
            )
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(certificate.bytes)
        } catch {
            throw .invalidArgument("client_certificate holds no certificate that reads (\(error))")
        }
        guard !chain.isEmpty else { throw .invalidArgument("client_certificate holds no certificate") }
        let passphrase = Array((certificate.passphrase ?? "").utf8)
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: certificate.bytes, format: .pem) { (set: ([UInt8]) -> Void) in
                set(passphrase)
            }
        } catch {
            throw .invalidArgument(
                certificate.passphrase == nil
                    ? "client_certificate holds no private key that reads (an encrypted key needs client_certificate_passphrase)"
                    : "client_certificate's private key does not read with the passphrase given")
        }
        return (chain, key)
    }

    /// Checks a caller's certificate file as a task will use it (`Start`, `Upload`).
    public static func check(_ certificate: ClientCertificate) throws(DownloadError) {
        _ = try load(certificate)
    }

    /// `base` presenting `certificate` to a server that asks for one.
    static func configuration(
        _ base: TLSConfiguration, presenting certificate: ClientCertificate
    ) throws(DownloadError)
        -> TLSConfiguration
    {
        let (chain, key) = try load(certificate)
        var configuration = base
        configuration.certificateChain = chain.map { .certificate($0) }
        configuration.privateKey = .privateKey(key)
        return configuration
    }
}
