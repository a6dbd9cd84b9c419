import AsyncHTTPClient
import NIOCore

/// What a response's receiver needs of the request it streams: its event loop, and a way to end
/// it with an error. AsyncHTTPClient's task, or a request forwarded through a proxy
/// (`ForwardedRequest`), which drives the same callbacks.
struct InFlightRequest: Sendable {
    let eventLoop: EventLoop
    let fail: @Sendable (Error) -> Void

    init(eventLoop: EventLoop, fail: @escaping @Sendable (Error) -> Void) {
        self.eventLoop = eventLoop
        self.fail = fail
    }

    init<Response>(_ task: HTTPClient.Task<Response>) {
        self.init(eventLoop: task.eventLoop, fail: { task.fail(reason: $0) })
    }
}
