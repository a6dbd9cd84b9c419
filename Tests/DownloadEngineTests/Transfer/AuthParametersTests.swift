@testable import DownloadEngine
import NIOHTTP1
import XCTest

/// A challenge's auth-params as RFC 9110 writes them: quoted strings with commas and escapes,
/// tokens, a second challenge left alone, and nothing taken from a realm's text.
final class AuthParametersTests: XCTestCase {
    func testDigestParametersWithQuotedCommasAndEscapes() throws {
        let headers = HTTPHeaders([
            (
                "WWW-Authenticate",
                #"Digest realm="a, \"b\"", qop="auth,auth-int", algorithm=SHA-256, nonce="n1", opaque="o", Basic realm="other""#
            )
        ])
        let (scheme, realm, parameters) = try XCTUnwrap(HTTPHeaderRules.authChallenge(headers))
        XCTAssertEqual(scheme, "Digest")
        XCTAssertEqual(realm, #"a, "b""#)
        XCTAssertEqual(parameters["qop"], "auth,auth-int")
        XCTAssertEqual(parameters["algorithm"], "SHA-256")
        XCTAssertEqual(parameters["nonce"], "n1")
        XCTAssertEqual(parameters["opaque"], "o")
        XCTAssertEqual(parameters.count, 5, "the second challenge's realm is not this one's: \(parameters)")
    }

    func testARealmIsItsParameterNotAWordInAnother() throws {
        // Before, "realm" was found by its text: in another parameter's value it was taken.
        let headers = HTTPHeaders([("WWW-Authenticate", #"Bearer error="realm=fake", realm="api""#)])
        let (_, realm, parameters) = try XCTUnwrap(HTTPHeaderRules.authChallenge(headers))
        XCTAssertEqual(realm, "api")
        XCTAssertEqual(parameters["error"], "realm=fake")
    }

    func testAnUnclosedQuoteOrAToken68GivesWhatCameBefore() {
        XCTAssertEqual(AuthParameters.parse(#" realm="x", nonce="unclosed"#), ["realm": "x"])
        XCTAssertEqual(AuthParameters.parse(" abc123=="), [:])
    }
}
