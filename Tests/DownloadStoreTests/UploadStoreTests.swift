import Crypto
import DownloadModel
@testable import DownloadStore
import Foundation
import GRDB
import TestSupport
import XCTest

/// An upload on a real SQLite file: its file, form and identity as JSON, its reply's body in a
/// column of its own, through an insert, a save and a restart; and through resume data (the
/// reply left out).
final class UploadStoreTests: XCTestCase {
    var directory: TemporaryDirectory!
    var path: String { directory.file("downloads.sqlite") }

    override func setUp() async throws {
        directory = try TemporaryDirectory(prefix: "upload-store-test")
    }

    override func tearDown() async throws {
        directory?.remove()
    }

    func upload() -> DownloadTaskRecord {
        var request = DownloadRequest(
            owner: 1000, session: "photos", url: "https://example.org/upload", destination: "/home/me/photo.jpg",
            destinationIsDirectory: false
        )
        request.upload = UploadSpec(
            source: "/home/me/photo.jpg", reopensByPath: true, method: "POST", contentType: "image/jpeg",
            form: MultipartForm(field: "file", filename: "photo \"1\".jpg", fields: ["album": "Holidays"]),
            replyDestination: nil, snapshot: nil,
            identity: SourceIdentity(device: 2049, inode: 1 << 40, size: 3_000_000, modifiedSeconds: 1_764_000_000, modifiedNanoseconds: 5)
        )
        return DownloadTaskRecord(id: 12, request: request)
    }

    func testAnUploadAndItsReplyRoundTrip() throws {
        let store = try DownloadStore(DatabaseQueue(path: path))
        var record = upload()
        XCTAssertEqual(record.kind, "upload")
        XCTAssertEqual(record.expectedLength, record.upload?.bodyLength, "BytesExpected is the body's length, the form's framing included")
        XCTAssertGreaterThan(record.expectedLength, 3_000_000)
        XCTAssertEqual(store.commit([try store.inserting(record)]).filter { (try? $0.get()) == nil }.count, 0)
        XCTAssertEqual(try store.loadTasks().tasks, [record])

        record.state = .finished
        record.upload?.responseStatus = 201
        record.upload?.replyHeaders = ["location": "/photos/9", "set-cookie": "a=1, b=2"]
        record.upload?.replyBody = Array("{\"id\": 9}".utf8)
        try store.save(record)
        let reloaded = try DownloadStore(DatabaseQueue(path: path)).loadTasks().tasks
        XCTAssertEqual(reloaded, [record], "what a restart finds: the reply with its body")
        XCTAssertEqual(reloaded.first?.upload?.form?.boundary, record.upload?.form?.boundary, "the same boundary, so the same bytes go again")
    }

    func testResumeDataCarriesTheUploadButNotItsReply() throws {
        var record = upload()
        record.state = .paused
        record.upload?.responseStatus = 503
        record.upload?.replyBody = Array("busy".utf8)
        let key = SymmetricKey(size: .bits256)
        let data = try ResumeData(record: record).encoded(key: key)
        let decoded = try ResumeData.decode(data, key: key, owner: 1000)
        XCTAssertEqual(decoded.upload?.source, "/home/me/photo.jpg")
        XCTAssertEqual(decoded.upload?.identity, record.upload?.identity)
        XCTAssertEqual(decoded.upload?.form, record.upload?.form)
        XCTAssertEqual(decoded.upload?.responseStatus, 0)
        XCTAssertEqual(decoded.upload?.replyBody, [])
        XCTAssertEqual(DownloadTaskRecord(id: 13, request: decoded.request).upload?.method, "POST")
    }
}
