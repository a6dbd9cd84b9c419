/// A task's client certificate (`client_certificate`): what the caller's descriptor held, a PEM
/// file with the certificate chain and its private key, or a PKCS#12 file, and the passphrase
/// of an encrypted key. A secret: sealed in the store and in resume data, never shown, erased
/// when the task ends for good.
public struct ClientCertificate: Sendable, Hashable {
    public var bytes: [UInt8]
    public var passphrase: String?

    /// The most a certificate file may hold (a chain of a few certificates and a key).
    public static let maximumSize = 256 * 1024

    public init(bytes: [UInt8], passphrase: String?) {
        self.bytes = bytes
        self.passphrase = passphrase
    }

    /// PEM (text that begins with `-----BEGIN`), else PKCS#12 (DER).
    public var isPEM: Bool {
        let text = bytes.prefix(64).drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        return text.starts(with: Array("-----BEGIN".utf8))
    }
}
