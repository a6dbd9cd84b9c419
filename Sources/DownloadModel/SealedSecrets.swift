import Crypto
import Foundation
import ProxyRules

/// The secrets of a task's options, sealed one way wherever they are kept (a task's row in the
/// store, resume data): its request headers (an `Authorization`, a `Cookie`, a token), its `proxy`
/// (which may hold a password) and its client certificate (its private key and passphrase), as
/// one JSON value under ChaCha20-Poly1305 with a key derived from the daemon's for the place
/// (`purpose`), authenticated with what binds them there (a row's task id). A copy shows neither
/// their values nor their names, and a sealed value moved to another place does not open.
public struct SealedSecrets: Sendable {
    /// The derived key's bytes (`SymmetricKey` is not `Sendable`).
    private let keyBytes: [UInt8]
    var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// Why sealed secrets did not open (another key, another place, altered bytes).
    public struct Failure: Error, Sendable {
        public let message: String
    }

    /// The key is derived from `rootKey` (the daemon's) for `purpose`, never `rootKey` itself.
    public init(rootKey: SymmetricKey, purpose: String) {
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: rootKey, info: Array(purpose.utf8), outputByteCount: 32)
        keyBytes = derived.withUnsafeBytes { Array($0) }
    }

    /// The sealed JSON (its keys are the stored format: never renamed).
    private struct Sealed: Codable {
        var headers: [String: String]?
        var proxy: String?
        /// base64 of the client certificate's file, and its passphrase.
        var client_certificate: String?
        var client_certificate_passphrase: String?
    }

    /// `options` without its secrets, and those sealed for `binding` (nil: it has none).
    public func seal(_ options: DownloadOptions, binding: [UInt8]) throws -> (visible: DownloadOptions, sealed: String?)
    {
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
        let box = try ChaChaPoly.seal(plain, using: key, authenticating: binding)
        return (visible, box.combined.base64EncodedString())
    }

    /// Puts what `sealed` holds back into `options`.
    public func open(_ sealed: String, into options: inout DownloadOptions, binding: [UInt8]) throws(Failure) {
        guard let plain = openBytes(sealed, binding: binding),
            let secrets = try? JSONDecoder().decode(Sealed.self, from: plain)
        else {
            throw Failure(message: "its sealed headers, proxy and certificate do not open")
        }
        options.headers = secrets.headers ?? [:]
        if let text = secrets.client_certificate {
            guard let bytes = Data(base64Encoded: text) else {
                throw Failure(message: "its sealed client certificate is damaged")
            }
            options.clientCertificate = ClientCertificate(
                bytes: Array(bytes), passphrase: secrets.client_certificate_passphrase)
        }
        guard let text = secrets.proxy else {
            options.proxy = nil
            return
        }
        guard let proxy = try? ProxySetting.parse(text) else {
            throw Failure(message: "its sealed proxy does not parse")
        }
        options.proxy = proxy
    }

    /// The plain bytes of one sealed value (the one check every opening makes), nil when it does
    /// not open.
    func openBytes(_ sealed: String, binding: [UInt8]? = nil) -> Data? {
        guard let combined = Data(base64Encoded: sealed), let box = try? ChaChaPoly.SealedBox(combined: combined)
        else { return nil }
        if let binding { return try? ChaChaPoly.open(box, using: key, authenticating: binding) }
        return try? ChaChaPoly.open(box, using: key)
    }
}
