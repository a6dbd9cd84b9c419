import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore

/// One request body's waits for the connection to take more (each write's future, which is
/// AsyncHTTPClient's backpressure), ended with the request (`end()`).
///
/// AsyncHTTPClient (1.37) drops the future of a paused body's write without completing it when
/// the request fails or is cancelled (`RequestBag.StateMachine.fail` leaves `.paused(promise)`
/// for `.finished`): the body's task waited for ever, holding the upload's file open and a read
/// chunk, once per cancelled, paused or cut attempt. Here each wait also ends when the request
/// does.
final class BodyWaits: Sendable {
    private struct State {
        var ended = false
        var next = 0
        var waiting: [Int: EventLoopPromise<Void>] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// `body`, its writes' futures ending at the latest when `end()` is called.
    func guarding(_ body: HTTPClient.Body) -> HTTPClient.Body {
        .stream(contentLength: body.contentLength) { writer in
            body.stream(HTTPClient.Body.StreamWriter { part in self.race(writer.write(part)) })
        }
    }

    /// The request ended: every wait still open fails (`HTTPClientError.cancelled`), and a write
    /// after this one fails at once.
    func end() {
        let waiting = state.withLockedValue { state in
            state.ended = true
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for promise in waiting { promise.fail(HTTPClientError.cancelled) }
    }

    private func race(_ written: EventLoopFuture<Void>) -> EventLoopFuture<Void> {
        let promise = written.eventLoop.makePromise(of: Void.self)
        let key: Int? = state.withLockedValue { state in
            guard !state.ended else { return nil }
            state.next += 1
            state.waiting[state.next] = promise
            return state.next
        }
        guard let key else {
            Self.keep(written)
            promise.fail(HTTPClientError.cancelled)
            return promise.futureResult
        }
        Self.keep(written)
        written.whenComplete { result in
            _ = self.state.withLockedValue { $0.waiting.removeValue(forKey: key) }
            promise.completeWith(result)
        }
        return promise.futureResult
    }

    /// Debug builds of NIO stop the process when an unfulfilled future is freed: there a future
    /// holds itself (through its own callback) until it completes, so one AsyncHTTPClient dropped
    /// stays. Release builds free it.
    private static func keep(_ future: EventLoopFuture<Void>) {
        #if DEBUG
        future.whenComplete { _ in _ = future }
        #endif
    }
}
