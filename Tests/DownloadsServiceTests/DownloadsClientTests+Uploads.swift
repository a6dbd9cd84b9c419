import DBus
import DownloadsClient
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `uploadTask(with:fromFile:)`: the delegate hears the bytes sent, then the response and its
/// body, then the end, as URLSession's does; a refusal brings its response before the error.
extension DownloadsClientTests {
    func testAnUploadTaskReportsBytesSentTheResponseAndItsBody() async throws {
        let content = Self.content(1_200_000, seed: 96)
        let file = directory.file("photo.heic")
        try Data(content).write(to: URL(fileURLWithPath: file))
        var route = Route.receiving(status: 201, reply: "{\"id\": 9}")
        route.extraHeaders = [("Location", "/photos/9")]
        http.set("/photos", route)
        var refusing = Route.receiving()
        refusing.requiredAuthorization = "Bearer ok"
        http.set("/private", refusing)
        let recorder = Recorder()
        let session = try await session("photos", delegate: recorder)
        defer { session.invalidate() }
        let request = UploadRequest(
            url: try XCTUnwrap(URL(string: http.url("/photos"))), httpMethod: "POST",
            allHTTPHeaderFields: ["Content-Type": "image/heic"])
        let task = session.uploadTask(with: request, fromFile: file)
        XCTAssertTrue(task.isUpload)
        try await task.resume()
        let id = try XCTUnwrap(task.taskIdentifier)
        try await waitUntil { recorder.all.contains("events photos") }
        XCTAssertEqual(
            recorder.all,
            [
                "send \(id)", "response \(id) 201 /photos/9", "data \(id) {\"id\": 9}", "complete \(id) ok",
                "events photos",
            ])
        XCTAssertEqual(recorder.progress.withLockedValue { $0.last }, Int64(content.count))
        let received = try XCTUnwrap(http.received("/photos").first)
        XCTAssertEqual(received.method, "POST")
        XCTAssertEqual(received.headers["content-type"], "image/heic")
        XCTAssertEqual(Self.sha256(received.body), Self.sha256(content))

        let denied = session.uploadTask(
            with: UploadRequest(url: try XCTUnwrap(URL(string: http.url("/private")))), fromFile: file)
        try await denied.resume()
        let deniedID = try XCTUnwrap(denied.taskIdentifier)
        try await waitUntil { recorder.all.contains { $0.hasPrefix("complete \(deniedID)") } }
        XCTAssertEqual(
            recorder.all.filter {
                $0.hasPrefix("response \(deniedID)") || $0.hasPrefix("data \(deniedID)")
                    || $0.hasPrefix("complete \(deniedID)")
            },
            [
                "response \(deniedID) 401 ", "data \(deniedID) who are you?\n", "complete \(deniedID) HTTPError",
            ], "the refusal's response first, then the error")
    }
}
