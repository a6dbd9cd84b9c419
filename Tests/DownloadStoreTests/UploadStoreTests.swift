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
            identity: SourceIdentity(
                device: 2049, inode: 1 << 40, size: 3_000_000, modifiedSeconds: 1_764_000_000, modifiedNanoseconds: 5)
        )
        return DownloadTaskRecord(id: 12, request: request)
    }

    func testAnUploadAndItsReplyRoundTrip() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        var record = upload()
        XCTAssertEqual(record.kind, "upload")
        XCTAssertEqual(
            record.expectedLength, record.upload?.bodyLength,
            "BytesExpected is the body's length, the form's framing included")
        XCTAssertGreaterThan(record.expectedLength, 3_000_000)
        XCTAssertEqual(store.commit([try store.inserting(record)]).filter { (try? $0.get()) == nil }.count, 0)
        XCTAssertEqual(try store.loadTasks().tasks, [record])

        record.state = .finished
        record.upload?.responseStatus = 201
        record.upload?.replyHeaders = ["location": "/photos/9", "set-cookie": "a=1, b=2"]
        record.upload?.newReplyBody = Array("{\"id\": 9}".utf8)
        try store.save(record)
        let reopened = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let reloaded = try reopened.loadTasks().tasks
        XCTAssertNil(reloaded.first?.upload?.newReplyBody, "the body is not loaded with the task")
        record.upload?.newReplyBody = nil
        XCTAssertEqual(reloaded, [record], "what a restart finds: the reply, its body in the store")
        XCTAssertEqual(try reopened.replyBody(of: 12), Array("{\"id\": 9}".utf8))
        // A later save with nothing new keeps the body; a new empty reply replaces it.
        try reopened.save(record)
        XCTAssertEqual(try reopened.replyBody(of: 12), Array("{\"id\": 9}".utf8))
        record.upload?.newReplyBody = []
        try reopened.save(record)
        XCTAssertEqual(try reopened.replyBody(of: 12), [])
        XCTAssertEqual(
            reloaded.first?.upload?.form?.boundary, record.upload?.form?.boundary,
            "the same boundary, so the same bytes go again")
    }

    func testResumeDataCarriesTheUploadButNotItsReply() throws {
        var record = upload()
        record.state = .paused
        record.upload?.responseStatus = 503
        record.upload?.newReplyBody = Array("busy".utf8)
        let key = SymmetricKey(size: .bits256)
        let data = try ResumeData(record: record).encoded(key: key)
        let decoded = try ResumeData.decode(data, key: key, owner: 1000)
        XCTAssertEqual(decoded.upload?.source, "/home/me/photo.jpg")
        XCTAssertEqual(decoded.upload?.identity, record.upload?.identity)
        XCTAssertEqual(decoded.upload?.form, record.upload?.form)
        XCTAssertEqual(decoded.upload?.responseStatus, 0)
        XCTAssertNil(decoded.upload?.newReplyBody)
        XCTAssertEqual(DownloadTaskRecord(id: 13, request: decoded.request).upload?.method, "POST")
    }

    /// One user's kept replies take at most `maxReplyBytesPerOwner`: the oldest go first; another
    /// user's are untouched.
    func testRepliesBeyondTheBudgetDropTheOldestFirst() throws {
        let store = try DownloadStore(DatabaseQueue(path: path), secrets: .forTests)
        let megabyte = [UInt8](repeating: 7, count: 1 << 20)
        let count = DownloadStore.maxReplyBytesPerOwner / megabyte.count + 2
        var other = upload()
        other.id = 1
        other.owner = 1001
        XCTAssertEqual(store.commit([try store.inserting(other)]).filter { (try? $0.get()) == nil }.count, 0)
        other.state = .finished
        other.upload?.newReplyBody = megabyte
        try store.save(other)
        for index in 0..<count {
            var record = upload()
            record.id = UInt64(100 + index)
            XCTAssertEqual(store.commit([try store.inserting(record)]).filter { (try? $0.get()) == nil }.count, 0)
            record.state = .finished
            record.upload?.responseStatus = 201
            record.upload?.newReplyBody = megabyte
            try store.save(record)
        }
        XCTAssertEqual(try store.replyBody(of: 100), [], "the oldest went")
        XCTAssertEqual(try store.replyBody(of: 101), [])
        XCTAssertEqual(try store.replyBody(of: 102).count, megabyte.count, "the rest stay")
        XCTAssertEqual(try store.replyBody(of: UInt64(100 + count - 1)).count, megabyte.count, "the newest stays")
        XCTAssertEqual(
            try store.replyBody(of: 1).count, megabyte.count, "another user's reply is not theirs to push out")
        XCTAssertEqual(
            try store.loadTasks().tasks.first { $0.id == 100 }?.upload?.responseStatus, 201, "status and headers stay")
    }
}
