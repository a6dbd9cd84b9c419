import Crypto
import DownloadModel
import Foundation
import ProxyRules

/// What of a task's options is a secret in the store: its request headers (an `Authorization`,
/// a `Cookie`, a token), its `proxy` (which may hold a password) and its client certificate
/// (with its private key and passphrase). A row's `options` column
/// keeps them sealed (ChaCha20-Poly1305, under a key derived from the daemon's
/// `resume-data.key`, which lives in its own file beside the database), bound to the task's id:
/// a copy of the database alone shows neither their values nor their names, and a sealed value
/// moved to another row does not open.
public struct StoreSecrets: Sendable {
    /// The derived key's bytes (`SymmetricKey` is not `Sendable`).
    private let keyBytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// The key is derived from `rootKey` (the daemon's), never `rootKey` itself.
    public init(rootKey: SymmetricKey) {
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: rootKey, info: Array("org.example.Downloads store secrets".utf8), outputByteCount: 32)
        keyBytes = derived.withUnsafeBytes { Array($0) }
    }

    /// The sealed part of a task's options, as JSON before it is sealed.
    private struct Sealed: Codable {
        var headers: [String: String]?
        var proxy: String?
        /// base64 of the client certificate's file, and its passphrase.
        var client_certificate: String?
        var client_certificate_passphrase: String?
    }

    /// `options` without its secrets, and those sealed for task `id` (nil: it has none).
    func seal(_ options: DownloadOptions, task id: UInt64) throws -> (visible: DownloadOptions, sealed: String?) {
        guard !options.headers.isEmpty || options.proxy != nil || options.clientCertificate != nil else {
            return (options, nil)
        }
        var visible = options
        visible.headers = [:]
        visible.proxy = nil
        visible.clientCertificate = nil
        let plain = try JSONEncoder().encode(
            Sealed(
                headers: options.headers.isEmpty ? nil : options.headers, proxy: options.proxy?.text,
                client_certificate: options.clientCertificate.map { Data($0.bytes).base64EncodedString() },
                client_certificate_passphrase: options.clientCertificate?.passphrase))
        let box = try ChaChaPoly.seal(plain, using: key, authenticating: StoreSecrets.binding(id))
        return (visible, box.combined.base64EncodedString())
    }

    /// Puts what `sealed` holds back into `options`; throws when it does not open (another
    /// key, another row, altered bytes).
    func open(_ sealed: String, into options: inout DownloadOptions, task id: UInt64) throws {
        guard let combined = Data(base64Encoded: sealed), let box = try? ChaChaPoly.SealedBox(combined: combined),
            let plain = try? ChaChaPoly.open(box, using: key, authenticating: StoreSecrets.binding(id)),
            let secrets = try? JSONDecoder().decode(Sealed.self, from: plain)
        else {
            throw StoreError("its sealed headers and proxy do not open (was resume-data.key replaced?)")
        }
        options.headers = secrets.headers ?? [:]
        if let text = secrets.client_certificate {
            guard let bytes = Data(base64Encoded: text) else {
                throw StoreError("its sealed client certificate is damaged")
            }
            options.clientCertificate = ClientCertificate(
                bytes: Array(bytes), passphrase: secrets.client_certificate_passphrase)
        }
        options.proxy = try secrets.proxy.map { text in
            do {
                return try ProxySetting.parse(text)
            } catch {
                throw StoreError("its sealed proxy does not parse")
            }
        }
    }

    private static func binding(_ id: UInt64) -> [UInt8] {
        Array("task \(id)".utf8)
    }
}
