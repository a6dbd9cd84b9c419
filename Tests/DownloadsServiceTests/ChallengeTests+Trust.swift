import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// A TLS server the system's store does not vouch for: reached by the key the task pins
/// (`pinned_public_keys`, `trust_pinned_only`) or by its app's `server-trust` answer; a pin
/// also narrows a server the store does trust.
extension ChallengeTests {
    /// `sha256//BASE64` of the public key in the PEM certificate `file`, as curl's documentation makes it.
    func pin(ofCertificate file: String) throws -> String {
        let output = try ProcessRunner.runBlocking(
            [
                "/bin/sh", "-c",
                "openssl x509 -in \"$1\" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
                "sh", file,
            ], timeout: 30)
        XCTAssertEqual(output.status, 0, "\(output)")
        return "sha256//" + output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The DER bytes of the PEM certificate `file`.
    func der(ofCertificate file: String) throws -> [UInt8] {
        let out = directory.file("cert.der")
        let output = try ProcessRunner.runBlocking(
            ["openssl", "x509", "-in", file, "-outform", "der", "-out", out], timeout: 30)
        XCTAssertEqual(output.status, 0, "\(output)")
        return Array(try Data(contentsOf: URL(fileURLWithPath: out)))
    }

    /// A pin no server here has.
    static let otherPin = "sha256//" + Data(repeating: 7, count: 32).base64EncodedString()

    func testASelfSignedServerIsReachedByItsPinnedKeyAloneAndNoOtherKey() async throws {
        let content = Self.content(200_000)
        try tls.file("pinned.bin", content)
        let pin = try pin(ofCertificate: tls.certificates.selfSigned)
        try await download(
            tls.url(.selfSigned, "/pinned.bin"), to: directory.file("pinned.bin"), expecting: content,
            options: ["pinned_public_keys": .strings([Self.otherPin, pin]), "trust_pinned_only": .boolean(true)])
        // Another key: refused before any request, with the key the server has.
        let refused = try await start(
            tls.url(.selfSigned, "/pinned.bin"), directory.file("refused.bin"),
            ["pinned_public_keys": .strings([Self.otherPin]), "trust_pinned_only": .boolean(true)])
        let ended = try await outcome(of: refused)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.TLSError")
        let message = try await property(refused, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(message.contains("(\(pin)) is not one of the task's pinned_public_keys"), message)
        XCTAssertEqual(tls.requests(for: "/pinned.bin", on: .selfSigned).count, 1, "the refused task sent nothing")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("refused.bin")))
        // The pin alone does not make a self-signed server trusted: the store's checks still hold.
        let unchecked = try await start(
            tls.url(.selfSigned, "/pinned.bin"), directory.file("unchecked.bin"),
            ["pinned_public_keys": .strings([pin])])
        let uncheckedOutcome = try await outcome(of: unchecked)
        XCTAssertEqual(uncheckedOutcome, "failed org.example.Downloads.Error.TLSError")
        let why = try await property(unchecked, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(why.contains("self-signed"), why)
    }

    func testAPinNarrowsAServerTheStoreTrusts() async throws {
        let content = Self.content(100_000)
        try tls.file("narrow.bin", content)
        // Every test certificate has the same key; this one is issued by the CA the daemon trusts.
        let pin = try pin(ofCertificate: tls.certificates.good)
        try await download(
            tls.url(.http2, "/narrow.bin"), to: directory.file("narrow.bin"), expecting: content,
            options: ["pinned_public_keys": .strings([pin])])
        let refused = try await start(
            tls.url(.http2, "/narrow.bin"), directory.file("other.bin"),
            ["pinned_public_keys": .strings([Self.otherPin])])
        let ended = try await outcome(of: refused)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.TLSError")
        XCTAssertEqual(tls.requests(for: "/narrow.bin", on: .http2).count, 1)
    }

    func testPinsThatAreNotSHA256KeysAreRefusedAtStart() async throws {
        let cases: [[String: DBusValue]] = [
            ["pinned_public_keys": .strings(["sha1//AAAA"])],
            ["pinned_public_keys": .strings(["sha256//" + Data(count: 20).base64EncodedString()])],
            ["pinned_public_keys": .strings(["sha256//not base64!"])],
            ["trust_pinned_only": .boolean(true)],
            ["pinned_public_keys": .strings(Array(repeating: Self.otherPin, count: 17))],
            ["pinned_public_keys": .string(Self.otherPin)],
        ]
        for options in cases {
            do {
                _ = try await start(tls.url(.selfSigned, "/x"), directory.file("x"), options)
                XCTFail("\(options) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", "\(options): \(error)")
            }
        }
    }

    func testAnAppTrustsASelfSignedServerWhenAskedForThisTaskAlone() async throws {
        let content = Self.content(300_000)
        try tls.file("home.bin", content)
        let app = try await agent(options: ["challenges": .strings(["server-trust"])]) { _ in
            Self.use(["trust": .boolean(true)])
        }
        defer { app.connection.close() }
        try await download(
            tls.url(.selfSigned, "/home.bin"), to: directory.file("home.bin"), expecting: content,
            options: ["session": .string("app")])
        let asked = try XCTUnwrap(app.questions.first)
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(asked.kind, "server-trust")
        XCTAssertEqual(asked.details["host"]?.stringValue, "localhost")
        XCTAssertEqual(asked.details["port"]?.uint16Value, UInt16(tls.port(.selfSigned)))
        let chain = asked.details["certificates"]?.arrayValue?.compactMap(\.bytesValue) ?? []
        XCTAssertEqual(chain.first, try der(ofCertificate: tls.certificates.selfSigned))
        XCTAssertTrue(asked.details["error"]?.stringValue?.contains("self-signed") == true, "\(asked.details)")
        XCTAssertNil(asked.details["realm"], "a server-trust question has no realm")
        // Trusted for that task only: another task of another session fails as before.
        let other = try await start(tls.url(.selfSigned, "/home.bin"), directory.file("other.bin"))
        let ended = try await outcome(of: other)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.TLSError")
        XCTAssertEqual(app.questions.count, 1)
        // Nothing of the trust is kept: the database holds no certificate.
        let base64 = Data(try der(ofCertificate: tls.certificates.selfSigned)).base64EncodedString()
        try assertNoFileHolds(String(base64.prefix(64)))
    }

    func testServerTrustAnswersThatAreNotTrueFailTheTaskAsWithoutAnApp() async throws {
        try tls.file("no.bin", Self.content(1000))
        let answers: [[DBusValue]] = [
            Self.use(["trust": .boolean(false)]),
            Self.use(["trust": .string("yes")]),
            Self.use(["user": .string("alice"), "password": .string("x")]),
            [.string("default"), .vardict([:])],
        ]
        for (n, answer) in answers.enumerated() {
            let session = "trust-\(n)"
            let app = try await agent(session, options: ["challenges": .strings(["server-trust"])]) { _ in answer }
            defer { app.connection.close() }
            let task = try await start(
                tls.url(.selfSigned, "/no.bin"), directory.file("no-\(n).bin"), ["session": .string(session)])
            let ended = try await outcome(of: task)
            XCTAssertEqual(ended, "failed org.example.Downloads.Error.TLSError", "\(answer)")
            XCTAssertEqual(app.questions.count, 1, "\(answer)")
        }
        XCTAssertTrue(tls.requests(for: "/no.bin", on: .selfSigned).isEmpty, "no request reached the server")
    }
}
