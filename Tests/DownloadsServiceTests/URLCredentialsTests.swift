import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// `https://user:password@host/…` as curl and wget take it: Start sends the credentials as the
/// task's `Authorization: Basic` header and keeps them out of the URL everyone sees; any other
/// URL a caller gives (a mirror, SetURL, ResumeWithData's `url`) may not carry them.
final class URLCredentialsTests: DaemonTestCase {
    private func withCredentials(_ url: String) -> String {
        url.replacingOccurrences(of: "http://", with: "http://alice:p%40ss@")
    }

    func testAURLsCredentialsAreSentAsAuthorizationAndShownNowhere() async throws {
        let content = Self.content(300_000, seed: 51)
        var route = Route(content: content)
        route.bytesPerSecond = 600_000
        http.set("/private", route)
        let task = try await start(withCredentials(http.url("/private")), directory.file("private"))
        try await waitBytes(task, atLeast: 50_000)
        let reply = try await call("Pause", [.objectPath(task)])
        let blob = try XCTUnwrap(reply.first?.bytesValue)
        _ = try await call("Resume", [.objectPath(task)])
        try await waitState(task, ["finished"])
        XCTAssertEqual(sha256(ofFile: directory.file("private")), Self.sha256(content))

        let basic = "Basic " + Data("alice:p@ss".utf8).base64EncodedString()
        let requests = http.requests(for: "/private")
        XCTAssertGreaterThanOrEqual(requests.count, 2, "the first request and the resumed one")
        XCTAssertEqual(Set(requests.map { $0.userHeaders["authorization"] }), [basic])
        let url = try await property(task, "URL")?.stringValue
        XCTAssertEqual(url, http.url("/private"), "the URL property without the credentials")
        let log = try String(contentsOfFile: daemonLog, encoding: .utf8)
        XCTAssertFalse(log.contains("alice") || log.contains("p%40ss"), log)
        let text = String(decoding: blob, as: UTF8.self)
        XCTAssertFalse(
            text.contains("alice") || text.contains(String(basic.dropFirst(6))), "resume data in clear: \(text)")

        // A server asking for credentials says how to give them.
        var locked = Route(content: [])
        locked.failFirst = (count: 10, status: 401, retryAfter: nil)
        http.set("/locked", locked)
        let refused = try await start(http.url("/locked"), directory.file("locked"))
        try await waitState(refused, ["failed"])
        let message = try await property(refused, "ErrorMessage")?.stringValue
        XCTAssertEqual(
            message,
            "the server answered 401 Unauthorized: it asks for credentials (user:password@ in the URL, or an Authorization header)"
        )

        // The caller's own Authorization header wins over the URL's.
        http.set("/token", Route(content: Self.content(1_000, seed: 52)))
        let token = try await start(
            withCredentials(http.url("/token")), directory.file("token"),
            ["headers": .stringDict(["authorization": "Bearer t"])])
        try await waitState(token, ["finished"])
        XCTAssertEqual(http.requests(for: "/token").first?.userHeaders["authorization"], "Bearer t")

        // Anywhere else they would be stored and never sent: refused.
        func refusal(_ body: () async throws -> Void) async -> String? {
            do {
                try await body()
                return nil
            } catch let error as BusError {
                return error.name + ": " + error.message
            } catch {
                return "\(error)"
            }
        }
        let mirror = await refusal {
            _ = try await self.start(
                http.url("/token"), self.directory.file("m"),
                ["mirrors": .strings([self.withCredentials(self.http.url("/copy"))])])
        }
        XCTAssertEqual(
            mirror?.hasPrefix("org.example.Downloads.Error.InvalidArgument: this URL carries a user name or password"),
            true, mirror ?? "")
        let paused = try await start(
            http.url("/private"), directory.file("again"), ["max_bytes_per_second": .uint64(10_000)])
        _ = try await call("Pause", [.objectPath(paused)])
        let setURL = await refusal {
            _ = try await self.client.call(
                destination: "org.example.Downloads", path: paused, interface: "org.example.Downloads.Task",
                method: "SetURL",
                arguments: [.string(self.withCredentials(self.http.url("/private")))]
            )
        }
        XCTAssertEqual(
            setURL?.hasPrefix("org.example.Downloads.Error.InvalidArgument: this URL carries a user name or password"),
            true, setURL ?? "")
    }
}
