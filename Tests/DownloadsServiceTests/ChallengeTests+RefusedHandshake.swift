import DBus
import Foundation
import TestSupport
import XCTest

/// The fourth trust round's eighth finding: servers that end the TLS handshake for want of a
/// client certificate (Apache's `SSLVerifyClient require`, Python's `CERT_REQUIRED`), where nginx
/// finishes it and answers `400`. The app registered for `client-certificate` is asked as for
/// nginx's 400, with the server's CAs when its TLS 1.2 `CertificateRequest` names them, and the
/// download goes on with its answer; `client_certificate` given at Start works against them too.
extension ChallengeTests {
    func certificateAgent() async throws -> Agent {
        let file = tls.certificates.client
        return try await agent(options: ["challenges": .strings(["client-certificate"])]) { _ in
            guard let fd = try? Self.descriptor(file) else { return [.string("default"), .vardict([:])] }
            return Self.use(["certificate": fd])
        }
    }

    func testServersThatRefuseTheHandshakeAskTheAppForItsCertificate() async throws {
        for (kind, tls12Only) in [
            (CertificateRequiringServer.Kind.apache, false), (.apache, true), (.python, false), (.python, true),
        ] {
            let name = "\(kind.rawValue)\(tls12Only ? "-tls12" : "-tls13")"
            let server = try CertificateRequiringServer(kind, certificates: tls.certificates, tls12Only: tls12Only)
            defer { server.stop() }
            let content = Self.content(150_000, seed: UInt32(name.utf8.count))
            try server.file("mtls.bin", content)
            let app = try await certificateAgent()
            defer { app.connection.close() }
            try await download(
                server.url("mtls.bin"), to: directory.file(name), expecting: content,
                options: ["session": .string("app")])
            XCTAssertEqual(app.questions.map(\.kind), ["client-certificate"], name)
            let asked = try XCTUnwrap(app.questions.first, name)
            XCTAssertEqual(asked.details["port"]?.uint16Value, UInt16(server.port), name)
            // The CA Apache names, read from the CertificateRequest of a TLS 1.2 handshake (the
            // probe's, where TLS 1.3 would encrypt it); Python's names none (it sets no CA list).
            let issuers = asked.details["issuers"]?.arrayValue?.compactMap(\.bytesValue) ?? []
            if kind == .apache {
                XCTAssertNotNil(
                    issuers.first.flatMap { Data($0).range(of: Data("Downloads Test CA".utf8)) }, "\(name): \(asked)")
            } else {
                XCTAssertEqual(issuers, [], name)
            }
        }
    }

    func testAStartsCertificateIsPresentedToAServerThatRequiresOne() async throws {
        let server = try CertificateRequiringServer(.apache, certificates: tls.certificates)
        defer { server.stop() }
        let content = Self.content(90_000, seed: 44)
        try server.file("given.bin", content)
        try await download(
            server.url("given.bin"), to: directory.file("given.bin"), expecting: content,
            options: ["client_certificate": try Self.descriptor(tls.certificates.client)])
    }

    /// A hostile (or merely broken) server whose every handshake ends in `handshake_failure`
    /// without asking for a certificate: the probe sees no `CertificateRequest`, the app is not
    /// asked, and the task fails `TLSError` as before.
    func testAHandshakeFailureWithoutACertificateRequestIsNotAQuestion() async throws {
        let server = try CertificateRequiringServer(.python, certificates: tls.certificates, alertOnly: true)
        defer { server.stop() }
        let app = try await certificateAgent()
        defer { app.connection.close() }
        let task = try await start(server.url("x.bin"), directory.file("x.bin"), ["session": .string("app")])
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.TLSError")
        XCTAssertEqual(app.questions.count, 0, "a server that asks for nothing is not the app's question")
    }

    func testWithoutAnAppARefusedHandshakeFailsAsTLSErrorAndSaysWhy() async throws {
        let server = try CertificateRequiringServer(.apache, certificates: tls.certificates)
        defer { server.stop() }
        try server.file("no.bin", Self.content(1000))
        let task = try await start(server.url("no.bin"), directory.file("no.bin"))
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.TLSError")
        let message = try await property(task, "ErrorMessage")?.stringValue ?? ""
        XCTAssertTrue(message.contains("wants a client certificate"), message)
    }
}
