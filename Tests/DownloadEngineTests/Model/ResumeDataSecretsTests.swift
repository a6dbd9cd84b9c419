import Crypto
import Foundation
import ProxyRules
import XCTest

@testable import DownloadModel

/// Resume data seals a task's headers, proxy and client certificate as the store does
/// (`SealedSecrets`, one value bound to the task's id), and blobs made before, each secret sealed
/// alone, still open.
final class ResumeDataSecretsTests: XCTestCase {
    let key = SymmetricKey(size: .bits256)

    func record(_ options: DownloadOptions, id: UInt64 = 7) -> DownloadTaskRecord {
        DownloadTaskRecord(
            id: id, owner: 1000, session: "default", url: "http://example.test/f", destination: "/tmp/f",
            destinationIsDirectory: false, options: options, durableOffset: 10, expectedLength: 100,
            validator: "\"v\"")
    }

    var secretOptions: DownloadOptions {
        var options = DownloadOptions()
        options.headers = ["Authorization": "Bearer t0ken", "Cookie": "id=42"]
        options.proxy = try? ProxySetting.parse("http://alice:s3cret@proxy.test:3128")
        options.clientCertificate = ClientCertificate(bytes: Array("-----BEGIN KEY-----".utf8), passphrase: "pass")
        return options
    }

    func testTheSecretsAreSealedAsOneValueAndOpenAgain() throws {
        let blob = try ResumeData(record: record(secretOptions)).encoded(key: key)
        let text = String(decoding: blob, as: UTF8.self)
        for secret in ["t0ken", "Authorization", "Cookie", "s3cret", "proxy.test", "BEGIN KEY", "pass\""] {
            XCTAssertFalse(text.contains(secret), "\(secret) is not in the blob in clear")
        }
        XCTAssertTrue(text.contains("\"sealed_secrets\""), text)
        let opened = try ResumeData.decode(blob, key: key, owner: 1000).options
        XCTAssertEqual(opened.headers, secretOptions.headers)
        XCTAssertEqual(opened.proxy, secretOptions.proxy)
        XCTAssertEqual(opened.clientCertificate, secretOptions.clientCertificate)
    }

    func testABlobMadeBeforeWithEachSecretSealedAloneStillOpens() throws {
        // What the service wrote before: each secret sealed alone, unbound, under the same key.
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key, info: Array("org.example.Downloads resume-data headers".utf8), outputByteCount: 32)
        func sealed(_ bytes: Data) throws -> String {
            try ChaChaPoly.seal(bytes, using: derived).combined.base64EncodedString()
        }
        let old = secretOptions
        var visible = old
        visible.headers = [:]
        visible.proxy = nil
        visible.clientCertificate = nil
        let certificate = try JSONSerialization.data(withJSONObject: [
            "bytes": Data(old.clientCertificate?.bytes ?? []).base64EncodedString(), "passphrase": "pass",
        ])
        var body = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(visible)) as? [String: Any])
        body = [
            "task_id": 7, "owner_uid": 1000, "session": "default", "url": "http://example.test/f",
            "destination": "/tmp/f", "destination_is_directory": false, "offset": 10, "validator": "\"v\"",
            "expected_length": 100, "options": body,
            "sealed_headers": try sealed(JSONEncoder().encode(old.headers)),
            "sealed_proxy": try sealed(Data((old.proxy?.text ?? "").utf8)),
            "sealed_client_certificate": try sealed(certificate),
        ]
        let json = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        let blob = SignedBlob.encode(header: ResumeData.header, json: Array(json), key: key)
        let opened = try ResumeData.decode(blob, key: key, owner: 1000).options
        XCTAssertEqual(opened.headers, old.headers)
        XCTAssertEqual(opened.proxy, old.proxy)
        XCTAssertEqual(opened.clientCertificate, old.clientCertificate)
    }

    func testSealedSecretsMovedToAnotherTasksBlobDoNotOpen() throws {
        let seven = String(
            decoding: try ResumeData(record: record(secretOptions, id: 7)).encoded(key: key), as: UTF8.self)
        let json = try XCTUnwrap(seven.split(separator: "\n").dropFirst().first)
        var body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        body["task_id"] = 8
        let moved = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        let blob = SignedBlob.encode(header: ResumeData.header, json: Array(moved), key: key)
        XCTAssertThrowsError(try ResumeData.decode(blob, key: key, owner: 1000)) { error in
            XCTAssertTrue("\(error)".contains("do not open"), "\(error)")
        }
    }
}
