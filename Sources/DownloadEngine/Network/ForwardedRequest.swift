import AsyncHTTPClient
import DownloadModel
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A plain `http://` request through an HTTP proxy, forwarded: the request line carries the
/// absolute URL (`GET http://host/path HTTP/1.1`, RFC 9112 §3.2.2) and the proxy makes the
/// request, as curl does for http URLs. AsyncHTTPClient only tunnels (CONNECT), which proxies
/// refuse to port 80 by default (squid's `http_access deny CONNECT !SSL_ports`), so this one
/// request shape has its own small client: one connection per request (`Connection: close`),
/// reading only when the delegate took the last part (its futures are the backpressure, as
/// AsyncHTTPClient's are), streaming into the same delegate as every other request (a download's
/// `TransferDelegate`, an upload's `UploadDelegate`, whose body it sends after the head, each
/// part once the connection took the last).
/// A 407 is the proxy's (`HTTPClientError.proxyAuthenticationRequired`, so `ProxyError`); any
/// other status is the server's, through the proxy.
final class ForwardedRequest<Delegate: RequestEvents>: OutgoingRequest {
    let eventLoop: EventLoop
    private let promise: EventLoopPromise<Delegate.Response>
    private let delegate: Delegate
    /// What changes as the request goes, behind one leaf lock.
    private struct State {
        /// The connection, once made.
        var channel: Channel?
        /// Set once the request ended (its promise completed), so a late event changes nothing.
        var ended = false
        /// Its connection to the proxy, once made.
        var connected: ConnectionUse?
        /// The `resource_timeout`'s end, cancelled when the request ends first.
        var deadline: Scheduled<Void>?
    }
    private let state = NIOLockedValueBox(State())

    var futureResult: EventLoopFuture<Delegate.Response> { promise.futureResult }
    var connectionUse: ConnectionUse? { state.withLockedValue { $0.connected } }

    /// `target`: the absolute URL (no fragment); `headers` the request's own (Host, Proxy-
    /// Authorization, Connection and the body's Content-Length are added here).
    init(
        target: String, method: HTTPMethod = .GET, host: String, port: Int, headers: HTTPHeaders,
        body: HTTPClient.Body? = nil,
        proxyHost: String, proxyPort: Int, proxyAuthorization: (user: String, password: String)?, delegate: Delegate,
        connectTimeout: TimeAmount, deadline: NIODeadline?
    ) {
        eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        promise = eventLoop.makePromise()
        self.delegate = delegate
        var headers = headers
        headers.replaceOrAdd(name: "Host", value: RequestSender.Forwarding.hostHeader(host, port))
        if let credentials = proxyAuthorization {
            let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            headers.replaceOrAdd(name: "Proxy-Authorization", value: "Basic \(token)")
        }
        headers.replaceOrAdd(name: "Connection", value: "close")
        if let body {
            if let length = body.contentLength {
                headers.replaceOrAdd(name: "Content-Length", value: String(length))
            } else {
                headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
            }
        }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers)
        if let deadline {
            let scheduled = eventLoop.scheduleTask(deadline: deadline) { [weak self] () -> Void in
                self?.end(.failure(HTTPClientError.deadlineExceeded))
            }
            state.withLockedValue { $0.deadline = scheduled }
        }
        let connectStart = TaskMetrics.now
        ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.autoRead, value: false)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(Handler(request: self, head: head, body: body))
                }
            }
            .connect(host: proxyHost, port: proxyPort)
            .whenComplete { [self] result in
                switch result {
                case .success(let made):
                    // One connection a request: never reused; its peer is the proxy.
                    let use = ConnectionUse(
                        reused: false, remoteAddress: made.remoteAddress?.ipAddress, tlsVersion: nil,
                        connectStart: connectStart, readyAt: TaskMetrics.now)
                    let endedMeanwhile = state.withLockedValue { state in
                        state.connected = use
                        if !state.ended { state.channel = made }
                        return state.ended
                    }
                    if endedMeanwhile { made.close(promise: nil) }
                case .failure(let error):
                    end(.failure(error))
                }
            }
    }

    func cancel() {
        eventLoop.execute { self.end(.failure(HTTPClientError.cancelled)) }
    }

    /// What the delegate calls on this request.
    fileprivate var delegateRequest: InFlightRequest {
        InFlightRequest(
            eventLoop: eventLoop,
            fail: { [self] error in
                eventLoop.execute { self.end(.failure(error)) }
            })
    }

    /// Ends the request once (on the event loop): the delegate hears of a failure, the
    /// connection closes.
    fileprivate func end(_ result: Result<Delegate.Response, Error>) {
        eventLoop.preconditionInEventLoop()
        let first = state.withLockedValue { state in
            defer { state.ended = true }
            return !state.ended
        }
        guard first else { return }
        state.withLockedValue { $0.deadline }?.cancel()
        if case .failure = result { delegate.receivedError() }
        promise.completeWith(result)
        state.withLockedValue { $0.channel }?.close(promise: nil)
    }

    fileprivate var isEnded: Bool { state.withLockedValue { $0.ended } }

    /// Sends the request, then hands the response to the delegate one part at a time.
    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias OutboundOut = HTTPClientRequestPart

        private let request: ForwardedRequest
        private let head: HTTPRequestHead
        private let body: HTTPClient.Body?
        /// Parts decoded but not yet taken by the delegate.
        private var pending = CircularBuffer<HTTPClientResponsePart>()
        /// The delegate's future for the last part has not completed yet.
        private var busy = false
        private var complete = false

        init(request: ForwardedRequest, head: HTTPRequestHead, body: HTTPClient.Body?) {
            self.request = request
            self.head = head
            self.body = body
        }

        func channelActive(context: ChannelHandlerContext) {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            guard let body else {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                request.delegate.sentHead(request.delegateRequest)
                context.read()
                return context.fireChannelActive()
            }
            context.flush()
            request.delegate.sentHead(request.delegateRequest)
            // The body part by part, each once the connection took the last (the stream's
            // futures are the backpressure); the end after the last.
            let channel = context.channel, request = self.request
            let writer = HTTPClient.Body.StreamWriter { data in
                let written = channel.writeAndFlush(HTTPClientRequestPart.body(data))
                written.whenSuccess { request.delegate.sentBodyPart(data.readableBytes, request.delegateRequest) }
                return written
            }
            body.stream(writer).hop(to: channel.eventLoop).whenComplete { result in
                switch result {
                case .success: channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                case .failure(let error): request.end(.failure(error))
                }
            }
            context.read()
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            pending.append(unwrapInboundIn(data))
            deliver(context)
        }

        /// A read that decoded no whole part (a head split over several segments, as tinyproxy
        /// writes it, a line per segment) asks for the rest here: with reads made by hand,
        /// nothing else would, and the response would wait for the watchdog.
        func channelReadComplete(context: ChannelHandlerContext) {
            if pending.isEmpty, !busy, !complete, !closed, !request.isEnded { context.read() }
            context.fireChannelReadComplete()
        }

        /// The next part to the delegate once it took the last; a read when nothing waits.
        private func deliver(_ context: ChannelHandlerContext) {
            while !busy, !request.isEnded, let part = pending.popFirst() {
                let taken: EventLoopFuture<Void>
                switch part {
                case .head(let response):
                    if response.status == .proxyAuthenticationRequired {
                        return request.end(.failure(HTTPClientError.proxyAuthenticationRequired))
                    }
                    taken = request.delegate.receivedHead(response, request.delegateRequest)
                case .body(let buffer):
                    taken = request.delegate.receivedBodyPart(buffer, request.delegateRequest)
                case .end:
                    complete = true
                    return request.end(Result { try request.delegate.finished() })
                }
                busy = true
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                taken.hop(to: context.eventLoop).whenComplete { result in
                    let (handler, context) = loopBound.value
                    handler.busy = false
                    if case .failure(let error) = result { return handler.request.end(.failure(error)) }
                    handler.deliver(context)
                }
            }
            guard !busy, !complete, !request.isEnded else { return }
            // The parts that came before the connection closed are the delegate's; a response
            // cut before its end is then the connection's failure.
            if closed {
                request.end(.failure(HTTPClientError.remoteConnectionClosed))
            } else {
                context.read()
            }
        }

        /// The connection closed (the decoder had no more to give).
        private var closed = false

        func channelInactive(context: ChannelHandlerContext) {
            closed = true
            deliver(context)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            request.end(.failure(error))
        }
    }
}
