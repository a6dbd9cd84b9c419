@testable import DownloadModel
@testable import DownloadEngine
import XCTest

/// The transfer's decisions without I/O: events in, actions out.
final class TransferStateMachineTests: XCTestCase {
    typealias Machine = TransferStateMachine
    let limits = Machine.Limits(
        retry: RetryPolicy(maxAttempts: 2, baseDelay: 1, maxDelay: 8, retryAfterCap: 30), maxRedirects: 2,
        maxRestarts: 1)
    let url = "https://a.example/file"

    func testFirstRequestResumesOnlyWithAStrongValidator() {
        var fresh = Machine(url: url, limits: limits)
        XCTAssertEqual(
            fresh.start(offset: 0, validator: nil), .send(.init(url: url, range: nil, sendsCredentials: true)))
        var resuming = Machine(url: url, limits: limits)
        XCTAssertEqual(
            resuming.start(offset: 500, validator: "\"v\""),
            .send(.init(url: url, range: .init(offset: 500, validator: "\"v\""), sendsCredentials: true))
        )
        var noValidator = Machine(url: url, limits: limits)
        XCTAssertEqual(
            noValidator.start(offset: 500, validator: nil),
            .restartFromZero(
                reason: "no strong validator to resume with", after: 0,
                then: .init(url: url, range: nil, sendsCredentials: true))
        )
    }

    /// An event the state cannot take is our bug, never the server's: `InternalError` naming the
    /// step and the state (by name only: a request's URL may carry credentials).
    func testImpossibleStepsAreInternalErrorsNotInvalidResponses() {
        var idle = Machine(url: "https://user:secret@a.example/file", limits: limits)
        guard case .fail(let error) = idle.requestEnded(.complete, offset: 0, validator: nil, random: 0) else {
            return XCTFail("a response with no request out must fail the run")
        }
        XCTAssertEqual(error.code, .internalError)
        XCTAssertEqual(error.message, "the transfer took an impossible step: a response while idle")
        var twice = Machine(url: url, limits: limits)
        _ = twice.start(offset: 0, validator: nil)
        guard case .fail(let again) = twice.start(offset: 0, validator: nil) else {
            return XCTFail("a second start must fail")
        }
        XCTAssertEqual(again.description, "InternalError: the transfer took an impossible step: start while requesting")
        var notWaiting = Machine(url: url, limits: limits)
        _ = notWaiting.start(offset: 0, validator: nil)
        guard case .fail(let early) = notWaiting.retryDelayElapsed(offset: 0, validator: nil) else {
            return XCTFail("no retry was waiting")
        }
        XCTAssertFalse(early.message.contains("secret"))
        XCTAssertEqual(early.code, .internalError)
        XCTAssertFalse(early.isRetryable)
    }

    func testRedirectsKeepTheRangeAndDropCredentialsAcrossOrigins() {
        var machine = Machine(url: url, limits: limits)
        _ = machine.start(offset: 10, validator: "\"v\"")
        let range = Machine.ResumeRange(offset: 10, validator: "\"v\"")
        // Same origin (explicit default port): credentials stay.
        XCTAssertEqual(
            machine.requestEnded(
                .redirect(location: "https://A.example:443/next"), offset: 10, validator: "\"v\"", random: 0),
            .send(.init(url: "https://A.example:443/next", range: range, sendsCredentials: true))
        )
        // Another host: dropped, and they stay dropped for every later hop.
        XCTAssertEqual(
            machine.requestEnded(.redirect(location: "https://b.example/x"), offset: 10, validator: "\"v\"", random: 0),
            .send(.init(url: "https://b.example/x", range: range, sendsCredentials: false))
        )
        // DownloadError compares codes; the description compares the message too.
        let tooMany = machine.requestEnded(
            .redirect(location: "https://a.example/file"), offset: 10, validator: "\"v\"", random: 0)
        XCTAssertEqual(tooMany, .fail(.tooManyRedirects(2)))
        XCTAssertEqual("\(tooMany)", "\(Machine.Action.fail(.tooManyRedirects(2)))")
    }

    /// An upload drives the same machine: its method and body go with every hop a 307 or 308
    /// makes, a 303 (and a 301 or 302 of a POST) turns it into a GET without the body, as curl
    /// does; its retries send the method and the body again from the task's URL.
    func testAnUploadsRedirectsTurnItsMethodAsCurlDoes() {
        func hop(_ method: String, _ status: Int) -> Machine.Action {
            var machine = Machine(url: url, limits: limits, method: method, sendsBody: true)
            XCTAssertEqual(
                machine.start(offset: 0, validator: nil),
                .send(.init(url: url, range: nil, sendsCredentials: true, method: method, sendsBody: true)))
            return machine.requestEnded(
                .redirect(location: "https://a.example/next", status: status), offset: 0, validator: nil, random: 0)
        }
        let next = "https://a.example/next"
        for status in [307, 308] {
            XCTAssertEqual(
                hop("POST", status),
                .send(.init(url: next, range: nil, sendsCredentials: true, method: "POST", sendsBody: true)))
        }
        for status in [301, 302, 303] {
            XCTAssertEqual(
                hop("POST", status),
                .send(.init(url: next, range: nil, sendsCredentials: true, method: "GET", sendsBody: false)))
        }
        XCTAssertEqual(
            hop("PUT", 301), .send(.init(url: next, range: nil, sendsCredentials: true, method: "PUT", sendsBody: true))
        )
        XCTAssertEqual(
            hop("PUT", 303),
            .send(.init(url: next, range: nil, sendsCredentials: true, method: "GET", sendsBody: false)))

        var machine = Machine(url: url, limits: limits, method: "PUT", sendsBody: true)
        _ = machine.start(offset: 0, validator: nil)
        _ = machine.requestEnded(.redirect(location: next, status: 303), offset: 0, validator: nil, random: 0)
        XCTAssertEqual(
            machine.requestEnded(
                .failed(.http(status: 503, reason: "", retryAfter: nil)), offset: 0, validator: nil,
                random: 0),
            .retry(after: 0.8, because: .http(status: 503, reason: "", retryAfter: nil)))
        XCTAssertEqual(
            machine.retryDelayElapsed(offset: 0, validator: nil),
            .send(.init(url: url, range: nil, sendsCredentials: true, method: "PUT", sendsBody: true)),
            "a retry sends the method and the body again, from the task's URL")
    }

    /// A resumable upload's attempt that moved bytes the server keeps starts the count over and
    /// goes again at once (after a capped `Retry-After`); the next one that moves nothing waits
    /// the policy's first back-off, and the policy's count ends it as before.
    func testProgressStartsTheRetriesOver() {
        let cut = DownloadError.interrupted("cut")
        var machine = Machine(url: url, limits: limits, method: "PATCH", sendsBody: true)
        _ = machine.start(offset: 0, validator: nil)
        XCTAssertEqual(
            machine.requestEnded(.failed(cut), offset: 0, validator: nil, random: 0), .retry(after: 0.8, because: cut))
        _ = machine.retryDelayElapsed(offset: 0, validator: nil)
        XCTAssertEqual(
            machine.requestEnded(.failed(cut), offset: 0, validator: nil, random: 0), .retry(after: 1.6, because: cut))
        XCTAssertEqual(machine.retries, 2)
        _ = machine.retryDelayElapsed(offset: 0, validator: nil)
        XCTAssertEqual(
            machine.requestEnded(.failedAfterProgress(cut), offset: 0, validator: nil, random: 0),
            .retry(after: 0, because: cut))
        XCTAssertEqual(machine.retries, 0)
        _ = machine.retryDelayElapsed(offset: 0, validator: nil)
        let busy = DownloadError.http(status: 503, reason: "", retryAfter: 90)
        XCTAssertEqual(
            machine.requestEnded(.failedAfterProgress(busy), offset: 0, validator: nil, random: 0),
            .retry(after: 30, because: busy), "Retry-After, capped")
        _ = machine.retryDelayElapsed(offset: 0, validator: nil)
        XCTAssertEqual(
            machine.requestEnded(.failed(cut), offset: 0, validator: nil, random: 0), .retry(after: 0.8, because: cut))
        _ = machine.retryDelayElapsed(offset: 0, validator: nil)
        _ = machine.requestEnded(.failed(cut), offset: 0, validator: nil, random: 0)
        _ = machine.retryDelayElapsed(offset: 0, validator: nil)
        XCTAssertEqual(machine.requestEnded(.failed(cut), offset: 0, validator: nil, random: 0), .fail(cut))
        var refused = Machine(url: url, limits: limits, method: "PATCH", sendsBody: true)
        _ = refused.start(offset: 0, validator: nil)
        let forbidden = DownloadError.http(status: 403, reason: "", retryAfter: nil)
        XCTAssertEqual(
            refused.requestEnded(.failedAfterProgress(forbidden), offset: 0, validator: nil, random: 0),
            .fail(forbidden))
    }

    /// The caller's credentials go only to the origin they were given for, on every request of
    /// the task's life: a run that starts at a followed document's file on another origin sends
    /// none, and its retries and restarts ask the file, never the document again (issue 45).
    func testAFollowedDocumentIsTheRunsURLAndCredentialsStayWithTheirOrigin() {
        let document = "https://a.example/f.meta4", file = "https://b.example/f"
        var resumed = Machine(url: file, credentialsOrigin: document, limits: limits)
        XCTAssertEqual(
            resumed.start(offset: 0, validator: nil), .send(.init(url: file, range: nil, sendsCredentials: false)))
        var home = Machine(url: "https://a.example/other", credentialsOrigin: document, limits: limits)
        XCTAssertEqual(
            home.start(offset: 0, validator: nil),
            .send(.init(url: "https://a.example/other", range: nil, sendsCredentials: true)))

        var machine = Machine(url: document, credentialsOrigin: document, limits: limits)
        XCTAssertEqual(
            machine.start(offset: 0, validator: nil), .send(.init(url: document, range: nil, sendsCredentials: true)))
        XCTAssertEqual(
            machine.requestEnded(.followedDocument(location: file), offset: 0, validator: nil, random: 0),
            .send(.init(url: file, range: nil, sendsCredentials: false))
        )
        XCTAssertEqual(machine.originalURL, file)
        guard
            case .retry = machine.requestEnded(
                .failed(.http(status: 503, reason: "Service Unavailable")), offset: 0, validator: nil, random: 0)
        else {
            return XCTFail("a 503 is retried")
        }
        XCTAssertEqual(
            machine.retryDelayElapsed(offset: 1000, validator: "\"v\""),
            .send(.init(url: file, range: .init(offset: 1000, validator: "\"v\""), sendsCredentials: false)),
            "the retry continues the file, without credentials"
        )
    }

    func testOtherPortOrSchemeIsAnotherOrigin() {
        XCTAssertTrue(RedirectRules.sameOrigin("http://h/a", "http://H:80/b"))
        XCTAssertFalse(RedirectRules.sameOrigin("http://h/a", "http://h:8080/a"))
        XCTAssertFalse(RedirectRules.sameOrigin("http://h/a", "https://h/a"))
        XCTAssertFalse(RedirectRules.sameOrigin("http://h/a", "http://h.evil/a"))
    }

    func testInsecureRedirectFails() {
        var machine = Machine(url: url, limits: limits)
        _ = machine.start(offset: 0, validator: nil)
        guard
            case .fail(let error) = machine.requestEnded(
                .redirect(location: "http://a.example/"), offset: 0, validator: nil, random: 0)
        else { return XCTFail("an https → http redirect must fail") }
        XCTAssertEqual(error.name, "InsecureRedirect")
    }

    func testRetriesAreCountedAndBoundedAndHonourRetryAfter() {
        var machine = Machine(url: url, limits: limits)
        _ = machine.start(offset: 0, validator: nil)
        XCTAssertEqual(
            machine.requestEnded(.failed(.network("reset")), offset: 0, validator: nil, random: 0.5),
            .retry(after: 1, because: .network("reset"))
        )
        XCTAssertEqual(
            machine.retryDelayElapsed(offset: 100, validator: "\"v\""),
            .send(.init(url: url, range: .init(offset: 100, validator: "\"v\""), sendsCredentials: true)))
        let busy = DownloadError.http(status: 503, reason: "Busy", retryAfter: 7)
        XCTAssertEqual(
            machine.requestEnded(.failed(busy), offset: 100, validator: "\"v\"", random: 0.5),
            .retry(after: 7, because: busy))
        _ = machine.retryDelayElapsed(offset: 100, validator: "\"v\"")
        let third = machine.requestEnded(.failed(.network("reset")), offset: 100, validator: "\"v\"", random: 0.5)
        XCTAssertEqual(third, .fail(.network("reset")), "the third failure is past maxAttempts 2")
        XCTAssertEqual("\(third)", "\(Machine.Action.fail(.network("reset")))")
        XCTAssertEqual(machine.retries, 3)
    }

    func testNonRetryableErrorsFailAtOnce() {
        var machine = Machine(url: url, limits: limits)
        _ = machine.start(offset: 0, validator: nil)
        let notFound = DownloadError.http(status: 404, reason: "Not Found")
        XCTAssertEqual(machine.requestEnded(.failed(notFound), offset: 0, validator: nil, random: 0), .fail(notFound))
    }

    func testRestartsAreCountedApartFromRetries() {
        var machine = Machine(url: url, limits: limits)
        _ = machine.start(offset: 10, validator: "\"v\"")
        XCTAssertEqual(
            machine.requestEnded(.restartFromZero(reason: "changed"), offset: 10, validator: "\"v\"", random: 0),
            .restartFromZero(reason: "changed", after: 0, then: .init(url: url, range: nil, sendsCredentials: true))
        )
        XCTAssertEqual(machine.retries, 0)
        guard
            case .fail(let error) = machine.requestEnded(
                .restartFromZero(reason: "changed again"), offset: 0, validator: nil, random: 0)
        else { return XCTFail("a second restart is past maxRestarts 1") }
        XCTAssertEqual(error.name, "InvalidResponse")
    }

    func testRestartsAfterTheFirstBackOffAsRetriesDo() {
        var machine = Machine(
            url: url,
            limits: .init(
                retry: RetryPolicy(maxAttempts: 5, baseDelay: 1, maxDelay: 60, retryAfterCap: 300), maxRedirects: 10,
                maxRestarts: 5
            ))
        _ = machine.start(offset: 0, validator: nil)
        var delays: [Double] = []
        for _ in 0..<5 {
            guard
                case .restartFromZero(_, let delay, _) = machine.requestEnded(
                    .restartFromZero(reason: "206 to a request without Range"), offset: 0, validator: nil, random: 0.5
                )
            else { return XCTFail("a restart") }
            delays.append(delay)
        }
        XCTAssertEqual(delays, [0, 1, 2, 4, 8])
        guard
            case .fail = machine.requestEnded(.restartFromZero(reason: "again"), offset: 0, validator: nil, random: 0.5)
        else {
            return XCTFail("past maxRestarts")
        }
    }

    func testCompleteFinalizes() {
        var machine = Machine(url: url, limits: limits)
        _ = machine.start(offset: 0, validator: nil)
        XCTAssertEqual(machine.requestEnded(.complete, offset: 5, validator: nil, random: 0), .finalize)
    }

    func testAStopIsAnInputAtEveryStep() {
        var requesting = Machine(url: url, limits: limits)
        _ = requesting.start(offset: 0, validator: nil)
        XCTAssertEqual(requesting.stop(.pause), .stop(.pause))
        var waiting = Machine(url: url, limits: limits)
        _ = waiting.start(offset: 0, validator: nil)
        guard case .retry = waiting.requestEnded(.failed(.timeout("slow")), offset: 0, validator: nil, random: 0.5)
        else {
            return XCTFail("a timeout is retried")
        }
        XCTAssertEqual(waiting.stop(.cancel), .stop(.cancel))
        guard case .fail = waiting.retryDelayElapsed(offset: 0, validator: nil) else {
            return XCTFail("after a stop the machine has ended: no request goes out")
        }
    }

    func testARangesVerdictUsesTheDownloadsRetryPolicy() {
        let policy = limits.retry
        func verdict(_ result: Machine.RangeResult, failures: Int = 0) -> Machine.RangeAction {
            Machine.rangeEnded(result, failures: failures, retry: policy, random: 0.5)
        }
        let write = ResponseDecision.write(offset: 0, truncate: false, expectedLength: 10, validator: "\"v\"")
        XCTAssertEqual(verdict(.response(write, left: nil)), .claimNext)
        guard case .retry(let delay, let error) = verdict(.response(write, left: ByteRange(start: 4, end: 8))) else {
            return XCTFail("a range cut short is retried")
        }
        XCTAssertEqual(delay, policy.delay(forRetry: 1, retryAfter: nil, random: 0.5))
        XCTAssertEqual(error.code, .interrupted)
        XCTAssertEqual(
            verdict(.failed(.timeout("stalled")), failures: policy.maxAttempts), .giveUp(because: .timeout("stalled")))
        XCTAssertEqual(
            verdict(.failed(.http(status: 403, reason: "Forbidden"))),
            .endAttempt(.failed(.http(status: 403, reason: "Forbidden"))))
        XCTAssertEqual(
            verdict(.response(.restartFromZero(reason: "changed"), left: nil)),
            .endAttempt(.restartFromZero(reason: "changed")))
        XCTAssertEqual(verdict(.response(.redirect("/x"), left: nil)), .endAttempt(.redirect(location: "/x")))
        guard case .endAttempt(.restartFromZero) = verdict(.response(.alreadyComplete, left: nil)) else {
            return XCTFail("a 416 for a range is not the end of the file")
        }
        guard case .retry(let later, _) = verdict(.failed(.http(status: 503, reason: "Busy", retryAfter: 7))) else {
            return XCTFail("503 is retried")
        }
        XCTAssertEqual(later, 7, "Retry-After is honoured for a range as for the download")
    }
}
