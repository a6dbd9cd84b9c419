import Crypto
import Foundation
import NIOConcurrencyHelpers

/// A Digest login (RFC 7616, `qop=auth`) a route asks for, checked here on its own terms (not
/// with the service's code): each 401 gives a fresh nonce; the user, realm, a nonce it gave,
/// opaque and URI must match, the response must be the digest of them and the password, and a
/// nonce count (`nc`) is taken once per nonce (a replayed `Authorization` is refused; requests
/// on several connections may arrive out of order, RFC 7616 §3.4).
public final class DigestLogin: Sendable {
    public let user: String
    public let password: String
    public let realm: String
    /// `MD5` or `SHA-256`.
    public let algorithm: String
    public let opaque = "5ccc069c403ebaf9f0171e9517f40e41"
    /// The nonces given, and the counts each was used with.
    private let nonces = NIOLockedValueBox<[String: Set<UInt32>]>([:])
    private let refusals = NIOLockedValueBox<[String]>([])

    public init(user: String, password: String, realm: String, algorithm: String = "MD5") {
        self.user = user
        self.password = password
        self.realm = realm
        self.algorithm = algorithm
    }

    /// The `WWW-Authenticate` of a 401, with a fresh nonce.
    public func challenge() -> String {
        let nonce = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        nonces.withLockedValue { $0[nonce] = [] }
        return
            "Digest realm=\"\(realm)\", qop=\"auth,auth-int\", algorithm=\(algorithm), nonce=\"\(nonce)\", opaque=\"\(opaque)\""
    }

    /// Why the answers it refused were refused (for a test's message).
    public var refused: [String] { refusals.withLockedValue { $0 } }

    /// Whether `authorization` answers it for `method` on `uri` (its origin-form target).
    public func accepts(_ authorization: String?, method: String, uri: String) -> Bool {
        guard let authorization, authorization.hasPrefix("Digest ") else { return refuse("no Digest authorization") }
        let fields = Self.fields(authorization.dropFirst("Digest ".count))
        guard fields["username"] == user, fields["realm"] == realm, let nonce = fields["nonce"],
            nonces.withLockedValue({ $0[nonce] != nil }),
            fields["opaque"] == opaque, fields["uri"] == uri, fields["qop"] == "auth",
            fields["algorithm"]?.lowercased() == algorithm.lowercased(),
            let ncText = fields["nc"], ncText.count == 8, let nc = UInt32(ncText, radix: 16),
            let cnonce = fields["cnonce"], !cnonce.isEmpty
        else { return refuse("fields \(fields) for \(method) \(uri)") }
        let a1 = hash("\(user):\(realm):\(password)")
        let a2 = hash("\(method):\(uri)")
        guard fields["response"] == hash("\(a1):\(nonce):\(ncText):\(cnonce):auth:\(a2)") else {
            return refuse("a wrong response")
        }
        let fresh = nonces.withLockedValue { $0[nonce, default: []].insert(nc).inserted }
        return fresh ? true : refuse("nc \(ncText) used before")
    }

    private func refuse(_ why: String) -> Bool {
        refusals.withLockedValue { $0.append(why) }
        return false
    }

    private func hash(_ text: String) -> String {
        let data = Data(text.utf8)
        let bytes: [UInt8] =
            algorithm.lowercased() == "sha-256" ? Array(SHA256.hash(data: data)) : Array(Insecure.MD5.hash(data: data))
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// `name=value` and `name="value"` pairs, split at commas outside quotes.
    private static func fields(_ text: Substring) -> [String: String] {
        var result: [String: String] = [:]
        var parts: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" && quoted {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == "," && !quoted {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        for part in parts {
            guard let equals = part.firstIndex(of: "=") else { continue }
            let name = part[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            result[name] = part[part.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        return result
    }
}
