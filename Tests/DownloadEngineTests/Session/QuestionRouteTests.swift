import DownloadModel
import XCTest

@testable import DownloadEngine

/// `QuestionRoute.decide`, the one place a question's kind decides how it is put to the app.
final class QuestionRouteTests: XCTestCase {
    func question(_ kind: Challenge.Kind, status: Int, at url: String) -> Challenge {
        Challenge(kind: kind, scheme: kind == .httpAuth ? "Basic" : "", realm: "", status: status).at(url)
    }

    func testEachKindIsAskedOnlyAsItsAppAnswersIt() {
        let task = "https://example.org/f.iso"
        let all: (Challenge.Kind) -> Bool = { _ in true }
        let none: (Challenge.Kind) -> Bool = { _ in false }
        for kind in [Challenge.Kind.httpAuth, .proxyAuth, .serverTrust] {
            XCTAssertEqual(
                QuestionRoute.decide(question(kind, status: 401, at: task), taskURL: task, answers: all), .asIs)
            XCTAssertNil(QuestionRoute.decide(question(kind, status: 401, at: task), taskURL: task, answers: none))
        }
        // A client certificate: only over TLS, and only once a handshake shows the server asks.
        XCTAssertEqual(
            QuestionRoute.decide(question(.clientCertificate, status: 400, at: task), taskURL: task, answers: all),
            .certificate(orAsIs: false))
        XCTAssertNil(
            QuestionRoute.decide(
                question(.clientCertificate, status: 400, at: "http://example.org/f.iso"), taskURL: task, answers: all))
        // A 403 of the task's own link over TLS: a certificate if the server asks, else the link.
        XCTAssertEqual(
            QuestionRoute.decide(question(.linkExpired, status: 403, at: task), taskURL: task, answers: all),
            .certificate(orAsIs: true))
        XCTAssertEqual(
            QuestionRoute.decide(
                question(.linkExpired, status: 403, at: task), taskURL: task, answers: { $0 == .linkExpired }), .asIs)
        // A 410, and a redirect's target or a mirror, are not the task's own link.
        XCTAssertEqual(
            QuestionRoute.decide(question(.linkExpired, status: 410, at: task), taskURL: task, answers: all), .asIs)
        XCTAssertNil(
            QuestionRoute.decide(
                question(.linkExpired, status: 410, at: "https://mirror.example.org/f.iso"), taskURL: task,
                answers: { $0 == .linkExpired }))
        XCTAssertEqual(
            QuestionRoute.decide(
                question(.linkExpired, status: 403, at: "https://mirror.example.org/f.iso"), taskURL: task,
                answers: all), .certificate(orAsIs: false))
    }
}
