import Crypto
import Foundation
import NIOSSL
import X509

/// The share server's TLS key and self-signed certificate, made once and kept in the state
/// directory (`share-key.pem`, `share-certificate.pem`, the daemon's own: 0600), so that peers
/// see the same certificate across restarts. Nobody verifies it: a client of a LAN peer trusts
/// the file's hash, not the server (Passim makes its own the same way).
public struct ShareKey: Sendable {
    public let certificate: NIOSSLCertificate
    public let privateKey: NIOSSLPrivateKey
    /// The certificate's SHA-256, hexadecimal (what a test or a log compares).
    public let fingerprint: String

    /// Reads the key and certificate in `directory`, making them first if either is missing or
    /// unreadable (both made anew then).
    public static func loadOrCreate(in directory: String, hostName: String = "downloadsd") throws -> ShareKey {
        let keyPath = directory + "/share-key.pem"
        let certificatePath = directory + "/share-certificate.pem"
        if let key = try? String(contentsOfFile: keyPath, encoding: .utf8),
            let pem = try? String(contentsOfFile: certificatePath, encoding: .utf8),
            let loaded = try? ShareKey(keyPEM: key, certificatePEM: pem)
        {
            return loaded
        }
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(hostName) }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(20 * 365 * 86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                SubjectAlternativeNames([.dnsName(hostName)])
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
        let pem = try certificate.serializeAsPEM().pemString
        try StateFile.save(Data(key.pemRepresentation.utf8), to: keyPath)
        try StateFile.save(Data(pem.utf8), to: certificatePath)
        return try ShareKey(keyPEM: key.pemRepresentation, certificatePEM: pem)
    }

    init(keyPEM: String, certificatePEM: String) throws {
        privateKey = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
        certificate = try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem)
        let der = try certificate.toDERBytes()
        fingerprint = SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
    }
}
