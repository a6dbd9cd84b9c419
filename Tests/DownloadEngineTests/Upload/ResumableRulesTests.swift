@testable import DownloadEngine
import DownloadModel
import Foundation
import NIOHTTP1
import ProxyRules
import XCTest

/// The wire of the resumable protocols: what each IETF interop version marks, how a server's
/// answer is read (structured fields, both completeness headers, `Upload-Limit`), and tus's
/// capabilities, metadata and checksums.
final class ResumableRulesTests: XCTestCase {
    func testEachInteropVersionMarksCompletenessItsWay() {
        var v3 = HTTPHeaders()
        IETFUploadRules.append(&v3, version: 3, offset: 42)
        XCTAssertEqual(v3.first(name: "upload-incomplete"), "?0")
        XCTAssertNil(v3.first(name: "upload-complete"))
        XCTAssertNil(v3.first(name: "content-type"), "version 3 sends the file's type")
        var v6 = HTTPHeaders()
        IETFUploadRules.append(&v6, version: 6, offset: 42)
        XCTAssertEqual(v6.first(name: "upload-complete"), "?1")
        XCTAssertEqual(v6.first(name: "upload-offset"), "42")
        XCTAssertEqual(v6.first(name: "content-type"), "application/partial-upload")
        XCTAssertEqual(v6.first(name: "upload-draft-interop-version"), "6")
        var creation = HTTPHeaders()
        IETFUploadRules.creation(&creation, version: 5, length: 1000)
        XCTAssertEqual(creation.first(name: "upload-complete"), "?0")
        XCTAssertEqual(creation.first(name: "upload-length"), "1000")
    }

    func testAServersAnswerIsReadWhicheverHeaderItUses() {
        XCTAssertEqual(IETFUploadRules.complete(["Upload-Complete": "?1"]), true)
        XCTAssertEqual(
            IETFUploadRules.complete(["Upload-Incomplete": "?0"]), true,
            "NIOResumableUpload's final response says this in v5+")
        XCTAssertEqual(IETFUploadRules.complete(["Upload-Complete": "?0"]), false)
        XCTAssertNil(IETFUploadRules.complete(["Upload-Complete": "yes"]))
        XCTAssertEqual(IETFUploadRules.offset(["Upload-Offset": "1048576"]), 1_048_576)
        XCTAssertNil(IETFUploadRules.offset(["Upload-Offset": "-1"]))
        XCTAssertNil(IETFUploadRules.offset(["Upload-Offset": "12abc"]))
        let limit = IETFUploadRules.limit(["Upload-Limit": "min-size=0, max-size=5000000, max-age=3600"])
        XCTAssertEqual(limit.maxSize, 5_000_000)
        XCTAssertEqual(limit.maxAge, 3600)
        XCTAssertTrue(IETFUploadRules.spoken(["Upload-Limit": "min-size=0"]))
        XCTAssertFalse(IETFUploadRules.spoken(["Allow": "GET, PUT"]))
    }

    func testTusCapabilitiesMetadataAndChecksums() throws {
        let caps = try XCTUnwrap(
            TusRules.capabilities([
                "Tus-Version": "1.0.0,0.2.2", "Tus-Extension": "creation,creation-with-upload,termination,checksum",
                "Tus-Checksum-Algorithm": "md5,sha1", "Tus-Max-Size": "1073741824",
            ]))
        XCTAssertEqual(caps.checksum, "sha1", "sha256 when offered, else sha1; md5 never")
        XCTAssertTrue(caps.creationWithUpload)
        XCTAssertTrue(caps.termination)
        XCTAssertEqual(caps.maxSize, 1 << 30)
        XCTAssertNil(TusRules.capabilities(["Tus-Version": "0.2.2"]), "only 1.0.0 is spoken")
        XCTAssertNil(TusRules.capabilities(["Tus-Version": "1.0.0", "Tus-Extension": "creation"])?.checksum)
        let metadata = TusRules.metadata(
            filename: "photo.jpg", contentType: "image/jpeg",
            metadata: ["album": .string("Holidays"), "bad key": .string("x"), "count": .uint32(3)]
        )
        XCTAssertEqual(metadata, "filename cGhvdG8uanBn,filetype aW1hZ2UvanBlZw==,album SG9saWRheXM=")
        XCTAssertEqual(TusRules.checksum("sha1", of: Array("abc".utf8)), "sha1 qZk+NkcGgWq6PiVxeFDCbJzQ2J0=")
        XCTAssertEqual(
            TusRules.checksum("sha256", of: Array("abc".utf8)), "sha256 ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
        XCTAssertNotNil(TusRules.expires(["Upload-Expires": "Wed, 25 Jun 2014 16:00:00 GMT"]))
    }

    /// What one owner learnt of a URL serves only that owner, on that route, for that URL.
    func testAPlainServersAnswerIsKeptForItsOwnerRouteAndURL() throws {
        func record(_ owner: UInt32, app: String = "", proxy: ProxySetting? = nil) -> DownloadTaskRecord {
            var record = DownloadTaskRecord(
                id: 1, owner: owner, session: "s", url: "http://127.0.0.1:9/files/a", destination: "/tmp/x",
                destinationIsDirectory: false,
                options: DownloadOptions()
            )
            record.app = app
            record.options.proxy = proxy
            return record
        }
        let nobody = record(65534), alice = record(1000), app = record(65534, app: "org.example.App")
        XCTAssertNil(PlainServers.key("file", for: nobody))
        let servers = PlainServers()
        let key = try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/a#frag", for: nobody))
        XCTAssertEqual(key.url, "http://127.0.0.1:9/files/a")
        servers.rememberPlain(key)
        XCTAssertTrue(servers.isPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/a", for: nobody))))
        XCTAssertFalse(
            servers.isPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/b", for: nobody))), "the exact URL"
        )
        XCTAssertFalse(servers.isPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/", for: nobody))))
        XCTAssertFalse(
            servers.isPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/a", for: alice))), "another user")
        XCTAssertFalse(
            servers.isPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/a", for: app))), "another app")
        let proxied = record(65534, proxy: try ProxySetting.parse("http://127.0.0.1:3128"))
        XCTAssertFalse(
            servers.isPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/a", for: proxied))),
            "another route")
        // One owner filling its memory pushes out only its own answers.
        let aliceKey = try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/files/a", for: alice))
        servers.rememberPlain(aliceKey)
        for index in 0..<(PlainServers.capacity + 10) {
            servers.rememberPlain(try XCTUnwrap(PlainServers.key("http://127.0.0.1:9/x/\(index)", for: nobody)))
        }
        XCTAssertTrue(servers.isPlain(aliceKey))
        servers.forget(aliceKey)
        XCTAssertFalse(servers.isPlain(aliceKey))
    }
}
