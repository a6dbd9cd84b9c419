import Crypto
import Foundation

/// A user and password an app gave for a server's `Digest` challenge (RFC 7616), sent as a
/// fresh `Authorization` on each request: the challenge's nonce, a counted `nc` and a new
/// `cnonce` each time, over the request's method and URI. The password stays in memory only, as
/// every answer does (`AnsweredCredentials`).
public struct DigestCredentials: Sendable, Hashable {
    public let user: String
    let password: String
    let realm: String
    let nonce: String
    let opaque: String?
    /// `auth` when the server offered it; nil: RFC 2069's form, without `qop`.
    let qop: String?
    /// `MD5`, `MD5-sess`, `SHA-256` or `SHA-256-sess`, as the server named it.
    let algorithm: String
    private let counter = Counter()

    /// What `challenge` (its `parameters`) allows; throws why not (another `qop`, an algorithm not known here).
    public init(user: String, password: String, answering challenge: Challenge) throws(DownloadError) {
        let parameters = challenge.parameters
        guard let nonce = parameters["nonce"], !nonce.isEmpty else {
            throw .invalidArgument("the server's Digest challenge has no nonce")
        }
        let algorithm = parameters["algorithm"] ?? "MD5"
        guard ["md5", "md5-sess", "sha-256", "sha-256-sess"].contains(algorithm.lowercased()) else {
            throw .invalidArgument("the server's Digest algorithm is not one this service computes (MD5, SHA-256)")
        }
        var qop: String?
        if let offered = parameters["qop"] {
            let options = offered.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard options.contains("auth") else {
                throw .invalidArgument("the server's Digest asks for qop=auth-int, which this service does not send")
            }
            qop = "auth"
        }
        for text in [user, password] where text.contains(where: { $0.isNewline || $0 == "\"" || $0 == "\\" }) {
            throw .invalidArgument("a Digest user and password hold no line break, quote or backslash")
        }
        self.user = user
        self.password = password
        realm = challenge.realm
        self.nonce = nonce
        opaque = parameters["opaque"]
        self.qop = qop
        self.algorithm = algorithm
    }

    /// The `Authorization` of one request.
    public func authorization(method: String, uri: String) -> String {
        let count = String(format: "%08x", counter.next())
        let cnonce = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let lowered = algorithm.lowercased()
        var a1 = hash("\(user):\(realm):\(password)")
        if lowered.hasSuffix("-sess") { a1 = hash("\(a1):\(nonce):\(cnonce)") }
        let a2 = hash("\(method):\(uri)")
        let response =
            qop.map { hash("\(a1):\(nonce):\(count):\(cnonce):\($0):\(a2)") } ?? hash("\(a1):\(nonce):\(a2)")
        var fields = [
            "username=\"\(user)\"", "realm=\"\(Self.quoted(realm))\"", "nonce=\"\(Self.quoted(nonce))\"",
            "uri=\"\(Self.quoted(uri))\"", "algorithm=\(algorithm)", "response=\"\(response)\"",
        ]
        if let qop { fields += ["qop=\(qop)", "nc=\(count)", "cnonce=\"\(cnonce)\""] }
        if let opaque { fields.append("opaque=\"\(Self.quoted(opaque))\"") }
        return "Digest " + fields.joined(separator: ", ")
    }

    private func hash(_ text: String) -> String {
        let data = Data(text.utf8)
        let bytes: [UInt8] =
            algorithm.lowercased().hasPrefix("sha-256")
            ? Array(SHA256.hash(data: data)) : Array(Insecure.MD5.hash(data: data))
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    private static func quoted(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }

    public static func == (a: DigestCredentials, b: DigestCredentials) -> Bool {
        a.user == b.user && a.password == b.password && a.realm == b.realm && a.nonce == b.nonce
            && a.opaque == b.opaque && a.qop == b.qop && a.algorithm == b.algorithm
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(user)
        hasher.combine(realm)
        hasher.combine(nonce)
    }

    /// The nonce count (`nc`): each request of the task counts one more.
    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value: UInt32 = 0

        func next() -> UInt32 {
            lock.lock()
            defer { lock.unlock() }
            value &+= 1
            return value
        }
    }
}
