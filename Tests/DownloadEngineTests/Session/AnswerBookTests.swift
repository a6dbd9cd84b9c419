import DownloadModel
import XCTest

@testable import DownloadEngine

/// `AnswerBook`: an app's answers kept per session and origin, with the tasks that took each.
final class AnswerBookTests: XCTestCase {
    let session = SessionID(owner: 1000, name: "app")
    let other = SessionID(owner: 1000, name: "other")

    func login(_ url: String, header: String) throws -> AnsweredCredentials {
        let challenge = Challenge(kind: .httpAuth, scheme: "Basic", realm: "r", status: 401).at(url)
        let origin = try XCTUnwrap(Source(url)?.origin)
        return AnsweredCredentials(origin: origin, headers: ["Authorization": header], challenge: challenge)
    }

    func testATaskUsesWhatItTookAndAnotherSessionNeverDoes() throws {
        var book = AnswerBook()
        let answer = try login("https://a.example/f", header: "Basic one")
        book.take(.credentials(answer), task: 1, in: session)
        XCTAssertEqual(book.answers(for: 1, in: session).credentials, answer)
        // Another task of the session that did not take it, and a task of another session with
        // the same id, use nothing.
        XCTAssertNil(book.answers(for: 2, in: session).credentials)
        XCTAssertNil(book.answers(for: 1, in: other).credentials)
    }

    func testAPauseOrAnEndForgetsATasksAnswersAndRefusals() throws {
        var book = AnswerBook()
        let origin = try XCTUnwrap(Source("https://a.example/")?.origin)
        book.take(.credentials(try login("https://a.example/f", header: "Basic one")), task: 1, in: session)
        book.take(.credentials(try login("https://a.example/f", header: "Basic one")), task: 2, in: session)
        book.take(.trusted(TrustedServer(origin: origin, certificate: [1, 2])), task: 1, in: session)
        book.renewedLink(of: 1)
        book.forget(1, in: session)
        let left = book.answers(for: 1, in: session)
        XCTAssertNil(left.credentials)
        XCTAssertNil(left.trusted)
        // The other task that took the same answer keeps it.
        XCTAssertNotNil(book.answers(for: 2, in: session).credentials)
        // A fresh link forgotten: an expired link after it is asked afresh, not a refusal.
        let expired = Challenge(kind: .linkExpired, scheme: "", realm: "", status: 403).at("https://a.example/f")
        XCTAssertEqual(book.refused(expired, mayWantCertificate: false, task: 1, in: session), 0)
    }

    func testALoginAskedAgainIsARefusalWhateverItsRealmAndTheTaskHoldsOneOfEachKind() throws {
        var book = AnswerBook()
        book.take(.credentials(try login("https://a.example/f", header: "Basic one")), task: 1, in: session)
        // Its next answer, for another origin, replaces the first: one login per task, as before.
        book.take(.credentials(try login("https://b.example/f", header: "Basic two")), task: 1, in: session)
        XCTAssertEqual(book.answers(for: 1, in: session).credentials?.headers["Authorization"], "Basic two")
        let again = Challenge(kind: .httpAuth, scheme: "Basic", realm: "another", status: 401).at("https://b.example/f")
        XCTAssertEqual(book.refused(again, mayWantCertificate: false, task: 1, in: session), 1)
        XCTAssertNil(book.answers(for: 1, in: session).credentials)
        // Asked again with nothing held: the count stays.
        XCTAssertEqual(book.refused(again, mayWantCertificate: false, task: 1, in: session), 1)
        book.take(.credentials(try login("https://b.example/f", header: "Basic three")), task: 1, in: session)
        XCTAssertEqual(book.refused(again, mayWantCertificate: false, task: 1, in: session), 2)
    }

    func testTrustIsRefusedOnlyByTheOriginTrustedAndACertificateByAnyAsking() throws {
        var book = AnswerBook()
        let a = try XCTUnwrap(Source("https://a.example/")?.origin)
        book.take(.trusted(TrustedServer(origin: a, certificate: [1])), task: 1, in: session)
        let elsewhere = Challenge.serverTrust(chain: [[2]], error: "self-signed").at("https://b.example/f")
        XCTAssertEqual(book.refused(elsewhere, mayWantCertificate: false, task: 1, in: session), 0)
        XCTAssertNotNil(book.answers(for: 1, in: session).trusted)
        let same = Challenge.serverTrust(chain: [[3]], error: "changed").at("https://a.example/f")
        XCTAssertEqual(book.refused(same, mayWantCertificate: false, task: 1, in: session), 1)
        XCTAssertNil(book.answers(for: 1, in: session).trusted)

        let certificate = ClientCertificate(bytes: [4], passphrase: nil)
        book.take(.certificate(AnsweredCertificate(origin: a, certificate: certificate)), task: 1, in: session)
        XCTAssertEqual(book.answers(for: 1, in: session).certificate(at: a), certificate)
        // Presented to its origin alone, never where a redirect led.
        let b = try XCTUnwrap(Source("https://b.example/x")?.origin)
        XCTAssertNil(book.answers(for: 1, in: session).certificate(at: b))
        let asked = Challenge.clientCertificate(refusedHandshake: "handshake_failure").at("https://a.example/f")
        XCTAssertEqual(book.refused(asked, mayWantCertificate: true, task: 1, in: session), 2)
        XCTAssertNil(book.answers(for: 1, in: session).certificate)
    }

    func testANewerAnswerOfTheSessionForAnOriginIsWhatItsTasksUseNext() throws {
        var book = AnswerBook()
        book.take(.credentials(try login("https://a.example/f", header: "Basic old")), task: 1, in: session)
        book.take(.credentials(try login("https://a.example/f", header: "Basic new")), task: 2, in: session)
        XCTAssertEqual(book.answers(for: 1, in: session).credentials?.headers["Authorization"], "Basic new")
        XCTAssertEqual(book.answers(for: 2, in: session).credentials?.headers["Authorization"], "Basic new")
    }

    func testQuestionsAreNumberedOnce() {
        var book = AnswerBook()
        let first = book.nextQuestion()
        XCTAssertNotEqual(first, book.nextQuestion())
    }
}
