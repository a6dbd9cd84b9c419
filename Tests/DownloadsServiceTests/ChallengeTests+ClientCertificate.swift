import DBus
import DownloadsAPI
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// A TLS server that wants a client certificate (nginx `ssl_verify_client on` with the test CA):
/// given with `Start` (`client_certificate`, a descriptor), or by the app when the server asks.
extension ChallengeTests {
    /// A descriptor of `path`, as a caller hands it over.
    static func descriptor(_ path: String, flags: Int32 = O_RDONLY) throws -> DBusValue {
        let fd = open(path, flags | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return .unixFD(UnixFD(owning: fd))
    }

    /// A line of the client's private key (base64 of its bytes), to look for in the state files.
    func keyLine(_ file: String) throws -> String {
        let text = try String(contentsOfFile: file, encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        let start = try XCTUnwrap(lines.firstIndex { $0.contains("PRIVATE KEY-----") && $0.hasPrefix("-----BEGIN") })
        return lines[start + 1]
    }

    func testAClientCertificateGivenWithStartIsPresentedAndKeptSealed() async throws {
        let content = Self.content(400_000)
        try tls.file("mtls.bin", content)
        let certificates = tls.certificates
        // Without one, nginx answers 400: the task fails as any 400 does.
        let without = try await start(tls.url(.clientCertificate, "/mtls.bin"), directory.file("without.bin"))
        let ended = try await outcome(of: without)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError")
        try await download(
            tls.url(.clientCertificate, "/mtls.bin"), to: directory.file("mtls.bin"), expecting: content,
            options: ["client_certificate": try Self.descriptor(certificates.client)])
        try await download(
            tls.url(.clientCertificate, "/mtls.bin"), to: directory.file("encrypted.bin"), expecting: content,
            options: [
                "client_certificate": try Self.descriptor(certificates.clientEncrypted),
                "client_certificate_passphrase": .string(TestCertificates.clientPassphrase),
            ])
        XCTAssertEqual(
            tls.requests(for: "/mtls.bin", on: .clientCertificate).map(\.status), [400, 200, 200])
        // Neither the key nor its passphrase is in clear in the state directory.
        try assertNoFileHolds(try keyLine(certificates.client))
        try assertNoFileHolds(TestCertificates.clientPassphrase)
    }

    func testCertificateFilesThatCannotServeAreRefusedAtStart() async throws {
        let certificates = tls.certificates
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: directory.file("junk.pem")))
        try Data(count: 300 * 1024).write(to: URL(fileURLWithPath: directory.file("big.pem")))
        let cases: [(String, [String: DBusValue])] = [
            ("a directory", ["client_certificate": try Self.descriptor(directory.path, flags: O_RDONLY | O_DIRECTORY)]),
            ("junk", ["client_certificate": try Self.descriptor(directory.file("junk.pem"))]),
            ("over 256 KiB", ["client_certificate": try Self.descriptor(directory.file("big.pem"))]),
            ("a certificate without its key", ["client_certificate": try Self.descriptor(certificates.caFile)]),
            (
                "an encrypted key without its passphrase",
                ["client_certificate": try Self.descriptor(certificates.clientEncrypted)]
            ),
            (
                "a wrong passphrase",
                [
                    "client_certificate": try Self.descriptor(certificates.clientEncrypted),
                    "client_certificate_passphrase": .string("wrong"),
                ]
            ),
            ("a passphrase alone", ["client_certificate_passphrase": .string("x")]),
            ("a path instead of a descriptor", ["client_certificate": .string(certificates.client)]),
        ]
        for (what, options) in cases {
            do {
                _ = try await start(tls.url(.clientCertificate, "/x"), directory.file("x"), options)
                XCTFail("\(what) was taken")
            } catch let error as BusError {
                XCTAssertEqual(error.name, "org.example.Downloads.Error.InvalidArgument", "\(what): \(error)")
            }
        }
        XCTAssertTrue(tls.requests(for: "/x", on: .clientCertificate).isEmpty)
    }

    func testAnAppGivesItsCertificateWhenTheServerAsksForOne() async throws {
        let content = Self.content(300_000)
        try tls.file("asks.bin", content)
        let file = tls.certificates.client
        let app = try await agent(options: ["challenges": .strings(["client-certificate"])]) { _ in
            guard let fd = try? Self.descriptor(file) else { return [.string("default"), .vardict([:])] }
            return Self.use(["certificate": fd])
        }
        defer { app.connection.close() }
        try await download(
            tls.url(.clientCertificate, "/asks.bin"), to: directory.file("asks.bin"), expecting: content,
            options: ["session": .string("app")])
        let asked = try XCTUnwrap(app.questions.first)
        XCTAssertEqual(app.questions.count, 1)
        XCTAssertEqual(asked.kind, "client-certificate")
        XCTAssertEqual(asked.details["host"]?.stringValue, "localhost")
        XCTAssertEqual(asked.details["port"]?.uint16Value, UInt16(tls.port(.clientCertificate)))
        // The CA nginx names (`ssl_client_certificate`): the test CA's subject, DER.
        let issuers = asked.details["issuers"]?.arrayValue?.compactMap(\.bytesValue) ?? []
        XCTAssertEqual(issuers.count, 1, "\(asked.details)")
        XCTAssertNotNil(issuers.first.flatMap { Data($0).range(of: Data("Downloads Test CA".utf8)) })
        XCTAssertEqual(tls.requests(for: "/asks.bin", on: .clientCertificate).map(\.status), [400, 200])
        try assertNoFileHolds(try keyLine(file))
    }

    func testAnUploadToAServerThatWantsACertificateIsSentWithTheAppsAnswer() async throws {
        let source = directory.file("mtls-upload.bin")
        let content = Self.content(250_000)
        try Data(content).write(to: URL(fileURLWithPath: source))
        let file = tls.certificates.client
        let app = try await agent(options: ["challenges": .strings(["client-certificate"])]) { _ in
            guard let fd = try? Self.descriptor(file) else { return [.string("default"), .vardict([:])] }
            return Self.use(["certificate": fd])
        }
        defer { app.connection.close() }
        let reply = try await call(
            "Upload",
            [
                .string(tls.url(.clientCertificate, "/put/mtls.bin")), .string(source),
                .vardict(["session": .string("app"), "method": .string("PUT"), "protocol": .string("plain")]),
            ])
        let task = try XCTUnwrap(reply.first?.objectPathValue)
        try await assertFinished(task)
        XCTAssertEqual(app.questions.map(\.kind), ["client-certificate"])
        XCTAssertEqual(sha256(ofFile: tls.www + "/put/mtls.bin"), Self.sha256(content))
        XCTAssertEqual(tls.requests(for: "/put/mtls.bin", on: .clientCertificate).map(\.status), [400, 201])
    }

    func testARefusalFromAServerThatAsksForNoCertificateIsNotAQuestion() async throws {
        try FileManager.default.createDirectory(atPath: tls.www + "/listing", withIntermediateDirectories: true)
        let app = try await agent(options: ["challenges": .strings(["client-certificate"])]) { _ in
            [.string("default"), .vardict([:])]
        }
        defer { app.connection.close() }
        // nginx answers a directory without an index 403; this server asks for no certificate.
        let task = try await start(
            tls.url(.http2, "/listing/"), directory.file("listing"), ["session": .string("app")])
        let ended = try await outcome(of: task)
        XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError")
        XCTAssertTrue(app.questions.isEmpty, "asked: \(app.questions.map(\.kind))")
    }

    func testHostileCertificateAnswersAreRefusedAndTheTaskFailsAsWithoutOne() async throws {
        try tls.file("hostile.bin", Self.content(1000))
        let directoryPath = directory.path
        let caFile = tls.certificates.caFile
        let answers: [@Sendable () -> [DBusValue]] = [
            {
                [
                    .string("use"),
                    .vardict([
                        "certificate": (try? Self.descriptor(directoryPath, flags: O_RDONLY | O_DIRECTORY))
                            ?? .string("")
                    ]),
                ]
            },
            { [.string("use"), .vardict(["certificate": (try? Self.descriptor(caFile)) ?? .string("")])] },
            { Self.use(["certificate": .string("/etc/ssl/private/key.pem")]) },
            { Self.use(["user": .string("alice"), "password": .string("x")]) },
        ]
        for (n, answer) in answers.enumerated() {
            let session = "cert-\(n)"
            let app = try await agent(session, options: ["challenges": .strings(["client-certificate"])]) { _ in
                answer()
            }
            defer { app.connection.close() }
            let task = try await start(
                tls.url(.clientCertificate, "/hostile.bin"), directory.file("hostile-\(n).bin"),
                ["session": .string(session)])
            let ended = try await outcome(of: task)
            XCTAssertEqual(ended, "failed org.example.Downloads.Error.HTTPError", "answer \(n)")
            XCTAssertEqual(app.questions.count, 1, "answer \(n)")
        }
        XCTAssertEqual(tls.requests(for: "/hostile.bin", on: .clientCertificate).map(\.status), [400, 400, 400, 400])
    }
}

extension ChallengeTests {
    func downloadsctl(_ arguments: [String]) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(
            [DownloadsctlTests.ctl, "--address", bus.address] + arguments, environment: bus.environment, timeout: 60)
    }

    func testDownloadsctlGetTakesCurlsCertKeyAndPinnedKeyOptions() async throws {
        let content = Self.content(120_000)
        try tls.file("ctl.bin", content)
        let certificates = tls.certificates
        // A certificate and its key in one file, then in two (the key encrypted, its passphrase after ':').
        let one = directory.file("one.bin")
        var out = try await downloadsctl(
            ["get", "--cert", certificates.client, tls.url(.clientCertificate, "/ctl.bin"), "-o", one])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: one), Self.sha256(content))
        let two = directory.file("two.bin")
        out = try await downloadsctl([
            "get", "--cert", certificates.directory + "/client.pem:" + TestCertificates.clientPassphrase, "--key",
            certificates.directory + "/client-encrypted.key", tls.url(.clientCertificate, "/ctl.bin"), "-o", two,
        ])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: two), Self.sha256(content))
        // A self-signed server by its pinned key, as curl's --pinnedpubkey; another key fails.
        let pin = try pin(ofCertificate: certificates.selfSigned)
        let pinned = directory.file("pinned.bin")
        out = try await downloadsctl([
            "get", "--pinnedpubkey", "\(Self.otherPin);\(pin)", "--trust-pinned-only", tls.url(.selfSigned, "/ctl.bin"),
            "-o", pinned,
        ])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: pinned), Self.sha256(content))
        out = try await downloadsctl([
            "get", "--pinnedpubkey", Self.otherPin, "--trust-pinned-only", tls.url(.selfSigned, "/ctl.bin"), "-o",
            directory.file("refused.bin"),
        ])
        XCTAssertNotEqual(out.status, 0)
        XCTAssertTrue(out.stderr.contains("is not one of the task's pinned_public_keys"), out.description)
    }
}

extension ChallengeTests {
    /// The fourth trust round's seventh finding: the certificate an app gave for one origin is
    /// presented to that origin alone. A server that asks for one redirects to another origin that
    /// asks too but serves without (`certificateOptional`): the certificate is not presented there.
    func testAnAnsweredCertificateGoesOnlyToTheOriginThatAskedForIt() async throws {
        let content = Self.content(120_000, seed: 61)
        try tls.file("away.bin", content)
        let app = try await certificateAgent()
        defer { app.connection.close() }
        try await download(
            tls.url(.clientCertificate, "/elsewhere/away.bin"), to: directory.file("away.bin"), expecting: content,
            options: ["session": .string("app")])
        XCTAssertEqual(app.questions.count, 1)
        let asking = tls.requests(for: "/elsewhere/away.bin", on: .clientCertificate)
        XCTAssertEqual(asking.map(\.status), [400, 302])
        XCTAssertNotNil(asking.last?.clientCertificate, "the origin that asked got the certificate")
        let elsewhere = tls.requests(for: "/away.bin", on: .certificateOptional)
        XCTAssertEqual(elsewhere.map(\.status), [200])
        XCTAssertEqual(elsewhere.map(\.clientCertificate), [nil], "another origin is never shown it")
    }
}
