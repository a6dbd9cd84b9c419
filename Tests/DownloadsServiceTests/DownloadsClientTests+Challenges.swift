import DBus
import DownloadsClient
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import XCTest

extension DownloadsClientTests {
    /// A delegate that signs in: the first answer wrong, the second right.
    final class SigningIn: DownloadSessionDelegate {
        let challenges = NIOLockedValueBox([DownloadChallenge]())
        let completed = NIOLockedValueBox([String]())

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didReceive challenge: DownloadChallenge
        ) async -> ChallengeDisposition {
            challenges.withLockedValue { $0.append(challenge) }
            let password = challenge.previousFailureCount == 0 ? "guess" : "opensesame"
            return .useCredential(user: "carol", password: password)
        }

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didCompleteWithError error: DownloadsClientError?
        ) {
            completed.withLockedValue { $0.append(error.map { "\($0.name)" } ?? "ok") }
        }
    }

    func testTheDelegateSignsInAndTheDownloadGoesOn() async throws {
        let content = Self.content(400_000, seed: 33)
        var route = Route(content: content)
        route.requiredAuthorization = "Basic " + Data("carol:opensesame".utf8).base64EncodedString()
        http.set("/members", route)
        let delegate = SigningIn()
        var configuration = DownloadSession.Configuration.background(identifier: "members")
        configuration.bus = .address(bus.address)
        configuration.challengeKinds = ["http-auth"]
        let session = try await DownloadSession(configuration: configuration, delegate: delegate)
        defer { session.invalidate() }
        let target = directory.file("members.bin")
        let task = session.downloadTask(with: try XCTUnwrap(URL(string: http.url("/members"))), to: target)
        try await task.resume()
        try await waitUntil { !delegate.completed.withLockedValue { $0 }.isEmpty }
        XCTAssertEqual(delegate.completed.withLockedValue { $0 }, ["ok"])
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let challenges = delegate.challenges.withLockedValue { $0 }
        XCTAssertEqual(challenges.map(\.previousFailureCount), [0, 1], "a refused answer is asked again")
        XCTAssertEqual(challenges.first?.kind, "http-auth")
        XCTAssertEqual(challenges.first?.scheme, "Basic")
        XCTAssertEqual(challenges.first?.realm, "test")
        XCTAssertEqual(challenges.first?.url, http.url("/members"))
    }

    func testOnlyTheServiceIsAnsweredNotAnotherPeer() async throws {
        let delegate = SigningIn()
        var configuration = DownloadSession.Configuration.background(identifier: "peers")
        configuration.bus = .address(bus.address)
        configuration.challengeKinds = ["http-auth"]
        let session = try await DownloadSession(configuration: configuration, delegate: delegate)
        defer { session.invalidate() }
        // Another peer on the bus (this test's own connection) asks as the service would.
        do {
            _ = try await client.call(
                destination: session.proxy.connection.uniqueName, path: session.completionObject,
                interface: "org.example.Downloads.Client", method: "HandleChallenge",
                arguments: [
                    .objectPath("/org/example/Downloads/tasks/1"), .string("http-auth"),
                    .vardict(["scheme": .string("Basic"), "failures": .uint32(1)]),
                ])
            XCTFail("a peer that is not the service got an answer")
        } catch let error as BusError {
            XCTAssertEqual(error.name, BusError.accessDeniedName)
        }
        XCTAssertTrue(delegate.challenges.withLockedValue { $0 }.isEmpty, "the delegate was not asked")
    }
}

extension DownloadsClientTests {
    /// A delegate that gives a fresh link when the old one expired.
    final class Renewing: DownloadSessionDelegate {
        let fresh: String
        let challenges = NIOLockedValueBox([DownloadChallenge]())
        let completed = NIOLockedValueBox([String]())

        init(fresh: String) { self.fresh = fresh }

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didReceive challenge: DownloadChallenge
        ) async -> ChallengeDisposition {
            challenges.withLockedValue { $0.append(challenge) }
            return challenge.kind == "link-expired" ? .useURL(fresh) : .performDefaultHandling
        }

        func downloadSession(
            _ session: DownloadSession, task: BackgroundDownloadTask, didCompleteWithError error: DownloadsClientError?
        ) {
            completed.withLockedValue { $0.append(error.map { "\($0.name)" } ?? "ok") }
        }
    }

    func testTheDelegateRenewsAnExpiredLink() async throws {
        let content = Self.content(200_000, seed: 34)
        var expired = Route(content: content)
        expired.failFirst = (100, 410, nil)
        http.set("/expired", expired)
        http.set("/fresh", Route(content: content))
        let delegate = Renewing(fresh: http.url("/fresh"))
        var configuration = DownloadSession.Configuration.background(identifier: "links")
        configuration.bus = .address(bus.address)
        configuration.challengeKinds = ["link-expired"]
        let session = try await DownloadSession(configuration: configuration, delegate: delegate)
        defer { session.invalidate() }
        let target = directory.file("renewed.bin")
        let task = session.downloadTask(with: try XCTUnwrap(URL(string: http.url("/expired"))), to: target)
        try await task.resume()
        try await waitUntil { !delegate.completed.withLockedValue { $0 }.isEmpty }
        XCTAssertEqual(delegate.completed.withLockedValue { $0 }, ["ok"])
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        let challenges = delegate.challenges.withLockedValue { $0 }
        XCTAssertEqual(challenges.map(\.kind), ["link-expired"])
        XCTAssertEqual(challenges.first?.status, 410)
    }
}
