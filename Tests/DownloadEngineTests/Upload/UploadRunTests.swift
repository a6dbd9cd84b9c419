@testable import DownloadEngine
@testable import DownloadModel
import Foundation
import Glibc
import TestHTTPServer
import TestSupport
import XCTest

/// One `UploadRun` with the fake owner (`FakeRunOwner`) against a local server, as
/// `TransferRunTests` drive a download: no manager, no scheduler, no store, no daemon. What the
/// run did is read from the bytes the server received, the task's record and the events its
/// owner delivered.
final class UploadRunTests: RunTestCase {
    /// A file of `size` bytes and an upload task of it, as the manager hands it to a run: running.
    func runningUpload(
        _ path: String, size: Int, method: String = "PUT", _ change: (inout DownloadTaskRecord) -> Void = { _ in }
    ) throws -> (DownloadTask, [UInt8]) {
        let content = TestData.content(size, seed: 71)
        let source = directory.file("source.bin")
        try Data(content).write(to: URL(fileURLWithPath: source))
        let fd = open(source, O_RDONLY)
        defer { close(fd) }
        let identity = try XCTUnwrap(SourceIdentity.of(descriptor: fd))
        var request = DownloadRequest(
            owner: getuid(), session: "s", url: server.url(path), destination: source, destinationIsDirectory: false
        )
        request.upload = UploadSpec(
            source: source, reopensByPath: true, method: method, contentType: nil, form: nil, replyDestination: nil,
            snapshot: nil, identity: identity
        )
        request.upload?.transferProtocol = .plain
        var record = DownloadTaskRecord(id: 1, request: request)
        change(&record)
        let task = DownloadTask(record: record)
        XCTAssertNotNil(owner.start(task))
        return (task, content)
    }

    func run(_ task: DownloadTask) async {
        await UploadRun(task: task, owner: owner, start: task.runStart(answers: .none)).run()
        await owner.events.eventsDelivered(after: task)
    }

    func testAPutSendsTheFileOnceAndFinishesWithTheReply() async throws {
        server.set("/put", Route.receiving(status: 201, reply: "stored\n"))
        let (task, content) = try runningUpload("/put", size: 300_000)
        await run(task)

        XCTAssertEqual(task.record.state, .finished)
        XCTAssertEqual(server.received("/put").map(\.method), ["PUT"])
        XCTAssertEqual(server.received("/put").first.map { TestData.sha256($0.body) }, TestData.sha256(content))
        XCTAssertEqual(task.record.upload?.responseStatus, 201)
        XCTAssertEqual(task.withState { $0.bytesWritten }, 300_000)
        XCTAssertTrue(observer.all.contains { if case .finished(1, _) = $0 { true } else { false } }, "\(observer.all)")
        XCTAssertTrue(owner.asked.contains("lease direct"), "\(owner.asked)")
    }

    /// The rule for sending a request again, driven through the run: a POST whose body went out
    /// whole and whose answer was lost is not sent again (OutcomeUnknown); a PUT is.
    func testALostAnswerFailsAPostAndRetriesAPut() async throws {
        var cut = Route.receiving()
        cut.cutUploadAfter = 100_000
        cut.misbehaveTimes = 1
        server.set("/post", cut)
        let (post, _) = try runningUpload("/post", size: 100_000, method: "POST")
        await run(post)
        XCTAssertEqual(post.record.state, .failed)
        XCTAssertEqual(post.record.errorName, "OutcomeUnknown", "\(post.record.errorMessage ?? "")")
        XCTAssertEqual(post.record.upload?.sentWhole, true, "the doubt is recorded for a restart")
        XCTAssertEqual(server.received("/post").count, 1, "never sent again on its own")

        server.set("/put", cut)
        let (put, content) = try runningUpload("/put", size: 100_000, method: "PUT")
        await run(put)
        XCTAssertEqual(put.record.state, .finished)
        XCTAssertEqual(server.received("/put").count, 2, "PUT is idempotent: sent again")
        XCTAssertEqual(server.received("/put").last.map { TestData.sha256($0.body) }, TestData.sha256(content))
    }

    /// A transient status is retried under the owner's policy; a 4xx is the outcome, not retried.
    func testA503IsRetriedAndA403IsTheOutcome() async throws {
        var busy = Route.receiving()
        busy.failFirst = (count: 2, status: 503, retryAfter: nil)
        server.set("/busy", busy)
        let (task, _) = try runningUpload("/busy", size: 50_000)
        await run(task)
        XCTAssertEqual(task.record.state, .finished)
        XCTAssertEqual(server.received("/busy").count, 3)

        server.set("/forbidden", Route.receiving(status: 403, reply: "no\n"))
        let (refused, _) = try runningUpload("/forbidden", size: 50_000)
        await run(refused)
        XCTAssertEqual(refused.record.state, .failed)
        XCTAssertEqual(refused.record.errorName, "HTTPError")
        XCTAssertEqual(refused.record.upload?.responseStatus, 403)
        XCTAssertEqual(server.received("/forbidden").count, 1, "a 4xx is not retried")
    }

    /// A 307 keeps the method and the body; an answer before the body was read (a refusal, the
    /// connection closed under the sender) is the outcome, not a failure to retry.
    func testARedirectKeepsTheBodyAndAnEarlyRefusalIsTheOutcome() async throws {
        server.set("/store", Route.receiving())
        var moved = Route.receiving()
        moved.redirect = (307, "/store")
        server.set("/old", moved)
        let (task, content) = try runningUpload("/old", size: 80_000)
        await run(task)
        XCTAssertEqual(task.record.state, .finished)
        XCTAssertEqual(server.received("/store").map(\.method), ["PUT"])
        XCTAssertEqual(server.received("/store").first.map { TestData.sha256($0.body) }, TestData.sha256(content))

        var guarded = Route.receiving()
        guarded.requiredAuthorization = "Bearer good"
        guarded.refusesEarly = true
        server.set("/guarded", guarded)
        let (refused, _) = try runningUpload("/guarded", size: 8_000_000)
        await run(refused)
        XCTAssertEqual(refused.record.state, .failed)
        XCTAssertEqual(refused.record.errorName, "HTTPError")
        XCTAssertEqual(refused.record.upload?.responseStatus, 401)
        XCTAssertEqual(server.requests(for: "/guarded").count, 1, "not sent again")
    }

    /// The upload's redirects are the download's machine's (`TransferStateMachine`): a 303 of a
    /// POST is fetched with GET and no body, as curl does; the caller's credentials leave at the
    /// first hop to another origin and stay gone for every later hop, back to their origin too.
    func testRedirectsFollowTheMachinesRules() async throws {
        var seeOther = Route.receiving()
        seeOther.redirect = (303, "/result")
        server.set("/form", seeOther)
        server.set("/result", Route.receiving(status: 200, reply: "done\n"))
        let (post, _) = try runningUpload("/form", size: 20_000, method: "POST")
        await run(post)
        XCTAssertEqual(post.record.state, .finished, "\(post.record.errorMessage ?? "")")
        XCTAssertEqual(server.received("/form").map(\.method), ["POST"])
        // The server records requests with a body as received: the one to /result was a GET.
        XCTAssertEqual(server.requests(for: "/result").count, 1)
        XCTAssertEqual(server.received("/result").count, 0, "neither the POST nor its body follow a 303")

        let other = try TestHTTPServer()
        defer { other.stop() }
        var away = Route.receiving()
        away.redirect = (307, other.url("/hop"))
        server.set("/away", away)
        var back = Route.receiving()
        back.redirect = (307, server.url("/store"))
        other.set("/hop", back)
        server.set("/store", Route.receiving())
        let (put, content) = try runningUpload("/away", size: 30_000) {
            $0.options.headers = ["Authorization": "Bearer t"]
        }
        await run(put)
        XCTAssertEqual(put.record.state, .finished, "\(put.record.errorMessage ?? "")")
        XCTAssertEqual(server.received("/away").first?.headers["authorization"], "Bearer t")
        XCTAssertNil(other.received("/hop").first?.headers["authorization"], "not to another origin")
        XCTAssertNil(server.received("/store").first?.headers["authorization"], "nor back to its own after one")
        XCTAssertEqual(server.received("/store").first.map { TestData.sha256($0.body) }, TestData.sha256(content))

        var loop = Route.receiving()
        loop.redirect = (307, "/loop")
        server.set("/loop", loop)
        let (looping, _) = try runningUpload("/loop", size: 1_000)
        await run(looping)
        XCTAssertEqual(looping.record.errorName, "TooManyRedirects")
        XCTAssertEqual(server.received("/loop").count, owner.configuration.maxRedirects + 1)
    }

    /// `low_speed_limit` and `low_speed_time` hold an upload's body as they hold a download's:
    /// a server that reads it far slower ends the attempt as `Timeout` (retried, then failed);
    /// a body held to its own bandwidth limit below that speed is not taken for a slow server.
    func testTheMinimumSpeedHoldsAnUploadsBody() async throws {
        await useOwner { $0.retry = RetryPolicy(maxAttempts: 1, baseDelay: 0.05) }
        var slow = Route.receiving()
        slow.readBytesPerSecond = 64 * 1024
        slow.discardBodies = true
        server.set("/slow", slow)
        let (task, _) = try runningUpload("/slow", size: 24_000_000) { record in
            record.options.lowSpeedLimit = 2_000_000
            record.options.lowSpeedTime = 1
        }
        await run(task)
        XCTAssertEqual(task.record.state, .failed)
        XCTAssertEqual(task.record.errorName, "Timeout", "\(task.record.errorMessage ?? "")")
        XCTAssertTrue(task.record.errorMessage?.contains("slower than") ?? false, "\(task.record.errorMessage ?? "")")
        XCTAssertEqual(server.received("/slow").count, 2, "retried once, as the policy says")

        server.set("/paced", Route.receiving())
        let (paced, content) = try runningUpload("/paced", size: 600_000) { record in
            record.options.maxBytesPerSecond = 250_000
            record.options.lowSpeedLimit = 2_000_000
            record.options.lowSpeedTime = 1
        }
        await run(paced)
        XCTAssertEqual(paced.record.state, .finished, "\(paced.record.errorMessage ?? "")")
        XCTAssertEqual(server.received("/paced").first.map { TestData.sha256($0.body) }, TestData.sha256(content))
    }

    /// A server that takes the protocol question (`OPTIONS`, `protocol` auto) and never
    /// answers it gets the plain request once the probe's own time is out, not a stalled task.
    func testAServerThatNeverAnswersOptionsGetsThePlainUpload() async throws {
        var silent = Route.receiving()
        silent.silentOptions = true
        server.set("/quiet", silent)
        let (task, content) = try runningUpload("/quiet", size: 40_000) { $0.upload?.transferProtocol = .auto }
        await run(task)
        XCTAssertEqual(task.record.state, .finished, "\(task.record.errorMessage ?? "")")
        XCTAssertEqual(server.optionsAsked("/quiet"), 1, "asked once")
        XCTAssertEqual(server.received("/quiet").map(\.method), ["PUT"])
        XCTAssertEqual(server.received("/quiet").first.map { TestData.sha256($0.body) }, TestData.sha256(content))
    }
}
