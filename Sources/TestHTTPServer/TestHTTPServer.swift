import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An HTTP/1.1 server on 127.0.0.1 (port chosen by the kernel) whose routes misbehave on request,
/// in the spirit of curl's test server. Records every request for assertions.
public final class TestHTTPServer: Sendable {
    struct State {
        var routes: [String: Route] = [:]
        var requests: [RequestRecord] = []
        var counts: [String: Int] = [:]
        /// Connections accepted so far (each request records the number of its connection).
        var connections = 0
        /// Request bodies receiving routes took, in arrival order.
        var received: [ReceivedUpload] = []
        /// OPTIONS that `silentOptions` routes swallowed, by path.
        var optionsAsked: [String: Int] = [:]
        /// Request heads that arrived, by path (answered or not yet: `replyDelay`).
        var arrived: [String: Int] = [:]
    }

    let state = NIOLockedValueBox(State())
    private let channel: Channel
    public let port: Int
    /// The address it listens on: 127.0.0.1, or ::1.
    public let host: String

    /// - Parameter host: `127.0.0.1` or `::1`.
    public init(host: String = "127.0.0.1") throws {
        self.host = host
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [state] channel in
                channel.pipeline.configureHTTPServerPipeline(withErrorHandling: true).flatMap {
                    let connection = state.withLockedValue { state -> Int in
                        state.connections += 1
                        return state.connections
                    }
                    return channel.pipeline.addHandler(TestHTTPHandler(state: state, connection: connection))
                }
            }
        channel = try bootstrap.bind(host: host, port: 0).wait()
        port = channel.localAddress?.port ?? 0
    }

    public func url(_ path: String) -> String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)\(path)"
    }

    public func set(_ path: String, _ route: Route) {
        state.withLockedValue { $0.routes[path] = route }
    }

    public func update(_ path: String, _ change: @Sendable (inout Route) -> Void) {
        state.withLockedValue { state in
            if var route = state.routes[path] {
                change(&route)
                state.routes[path] = route
            }
        }
    }

    public var requests: [RequestRecord] { state.withLockedValue { $0.requests } }

    public func requests(for path: String) -> [RequestRecord] { requests.filter { $0.path == path } }

    /// How many `OPTIONS` a `silentOptions` route at `path` took (and never answered).
    /// How many requests for `path` arrived, answered or still held (`replyDelay`).
    public func arrived(_ path: String) -> Int { state.withLockedValue { $0.arrived[path] ?? 0 } }

    public func optionsAsked(_ path: String) -> Int { state.withLockedValue { $0.optionsAsked[path] ?? 0 } }

    /// The request bodies a receiving route at `path` took (or began to take).
    public func received(_ path: String) -> [ReceivedUpload] {
        state.withLockedValue { $0.received.filter { $0.path == path } }
    }

    public func stop() {
        try? channel.close().wait()
    }
}

final class TestHTTPHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let state: NIOLockedValueBox<TestHTTPServer.State>
    private var head: HTTPRequestHead?
    private var closed = false
    private let connection: Int

    init(state: NIOLockedValueBox<TestHTTPServer.State>, connection: Int) {
        self.state = state
        self.connection = connection
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        context.fireChannelInactive()
    }

    /// The index in `received` of the body being taken, and whether to keep its bytes.
    private var receiving: (index: Int, keep: Bool, cutAfter: Int?)?
    /// A slow route's reading rate: reads are asked for by hand, each after the time the last
    /// part took at this rate.
    private var readRate: Int?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            receiving = nil
            state.withLockedValue { $0.arrived[Self.path(of: head), default: 0] += 1 }
            if let route = state.withLockedValue({ $0.routes[Self.path(of: head)] }), route.receives,
                route.refusesEarly,
                let required = route.requiredAuthorization, head.headers.first(name: "authorization") != required
            {
                // Refused before the body: the answer, then the connection closed under the sender.
                self.head = nil
                respond(context: context, head: head)
                context.channel.close(promise: nil)
                return
            }
            startReceiving(head)
            readRate =
                receiving == nil ? nil : state.withLockedValue { $0.routes[Self.path(of: head)]?.readBytesPerSecond }
            if readRate != nil {
                // One read of at most 64 KiB at a time, each asked for by hand.
                let channel = context.channel
                channel.setOption(ChannelOptions.maxMessagesPerRead, value: 1)
                    .flatMap {
                        channel.setOption(
                            ChannelOptions.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 65536))
                    }
                    .flatMap { channel.setOption(ChannelOptions.autoRead, value: false) }
                    .whenComplete { [loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)] _ in
                        loopBound.value.read()
                    }
            }
        case .body(let buffer):
            guard let receiving else { return }
            let cut = state.withLockedValue { state -> Bool in
                if receiving.keep { state.received[receiving.index].body += buffer.readableBytesView }
                state.received[receiving.index].bytes += buffer.readableBytes
                return receiving.cutAfter.map { state.received[receiving.index].bytes >= $0 } ?? false
            }
            if cut {
                self.receiving = nil
                context.close(promise: nil)
            } else if let rate = readRate {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(
                    in: .nanoseconds(Int64(Double(buffer.readableBytes) / Double(rate) * 1e9))
                ) {
                    loopBound.value.read()
                }
            }
        case .end:
            guard let head, !closed else { return }
            if readRate != nil {
                readRate = nil
                context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            }
            if let receiving {
                state.withLockedValue { $0.received[receiving.index].complete = true }
            }
            // An upload's answer held after its body ended, any other's after the request (a
            // server slow to answer, or far away).
            if let delay = state.withLockedValue({ $0.routes[Self.path(of: head)]?.replyDelay }) {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(delay * 1000))) {
                    let (handler, context) = loopBound.value
                    handler.respond(context: context, head: head)
                }
                return
            }
            respond(context: context, head: head)
        }
    }

    static func path(of head: HTTPRequestHead) -> String {
        String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
    }

    /// A request with a body to a receiving route: it is recorded as it arrives.
    private func startReceiving(_ head: HTTPRequestHead) {
        guard head.method != .GET, head.method != .HEAD, head.method != .OPTIONS else { return }
        let path = Self.path(of: head)
        receiving = state.withLockedValue { state -> (Int, Bool, Int?)? in
            guard let route = state.routes[path], route.receives else { return nil }
            var headers: [String: String] = [:]
            for (name, value) in head.headers {
                headers[name.lowercased()] = headers[name.lowercased()].map { "\($0), \(value)" } ?? value
            }
            state.received.append(
                ReceivedUpload(
                    path: path, method: head.method.rawValue, headers: headers, body: [], bytes: 0, complete: false,
                    connection: connection
                ))
            let count = state.received.filter { $0.path == path }.count
            let cuts = route.misbehaveTimes.map { count <= $0 } ?? true
            return (state.received.count - 1, !route.discardBodies, cuts ? route.cutUploadAfter : nil)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1).first ?? "")
        if head.method == .OPTIONS {
            let silent = state.withLockedValue { state -> Bool in
                guard state.routes[path]?.silentOptions == true else { return false }
                state.optionsAsked[path, default: 0] += 1
                return true
            }
            if silent { return }
            // As a plain server answers an upload's question (neither tus nor the IETF draft):
            // not counted as a request of the route.
            sendSimple(
                context: context, status: .noContent, body: "", headers: ["Allow": "GET, HEAD, PUT, POST, PATCH"])
            return
        }
        let (route, count) = state.withLockedValue { state -> (Route?, Int) in
            state.counts[path, default: 0] += 1
            return (state.routes[path], state.counts[path] ?? 1)
        }
        var userHeaders: [String: String] = [:]
        let credentials: Set<String> = [
            "authorization", "cookie", "proxy-authorization", "referer", "if-modified-since", "if-none-match",
        ]
        for (name, value) in head.headers
        where name.lowercased().hasPrefix("x-") || credentials.contains(name.lowercased()) {
            userHeaders[name.lowercased()] = value
        }
        func record(_ status: Int) -> Int {
            state.withLockedValue { state in
                state.requests.append(
                    RequestRecord(
                        path: path, range: head.headers.first(name: "range"),
                        ifRange: head.headers.first(name: "if-range"),
                        acceptEncoding: head.headers.first(name: "accept-encoding"), userHeaders: userHeaders,
                        status: status, bodyBytesSent: 0, connection: connection
                    ))
                return state.requests.count - 1
            }
        }
        guard let route else {
            _ = record(404)
            sendSimple(context: context, status: .notFound, body: "no such path\n")
            return
        }
        if let (failCount, status, retryAfter) = route.failFirst, count <= failCount {
            _ = record(status)
            var headers = HTTPHeaders()
            if let retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
            sendSimple(
                context: context, status: HTTPResponseStatus(statusCode: status), body: "failing on purpose\n",
                headers: headers)
            return
        }
        if let (after, status) = route.failAfter, count > after {
            _ = record(status)
            sendSimple(context: context, status: HTTPResponseStatus(statusCode: status), body: "expired\n")
            return
        }
        if let digest = route.digest,
            !digest.accepts(head.headers.first(name: "authorization"), method: head.method.rawValue, uri: head.uri)
        {
            _ = record(401)
            sendSimple(
                context: context, status: .unauthorized, body: "who are you?\n",
                headers: ["WWW-Authenticate": digest.challenge()])
            return
        }
        if let required = route.requiredAuthorization, head.headers.first(name: "authorization") != required {
            _ = record(401)
            sendSimple(
                context: context, status: .unauthorized, body: "who are you?\n",
                headers: [
                    "WWW-Authenticate": (route.authenticate ?? "Basic realm=\"test\"").replacingOccurrences(
                        of: "{n}", with: "\(count)")
                ])
            return
        }
        if let (status, location) = route.redirect {
            _ = record(status)
            sendSimple(
                context: context, status: HTTPResponseStatus(statusCode: status), body: "",
                headers: ["Location": location])
            return
        }
        if route.receives, head.method != .GET, head.method != .HEAD {
            _ = record(route.uploadStatus)
            var headers = HTTPHeaders()
            for (name, value) in route.extraHeaders { headers.add(name: name, value: value) }
            headers.add(name: "X-Received-Method", value: head.method.rawValue)
            sendSimple(
                context: context, status: HTTPResponseStatus(statusCode: route.uploadStatus),
                body: String(decoding: route.content, as: UTF8.self), headers: headers
            )
            return
        }
        let total = route.content.count
        var status = HTTPResponseStatus.ok
        var start = 0
        var end = total  // exclusive
        var headers = HTTPHeaders()
        if let etag = route.etag { headers.add(name: "ETag", value: etag) }
        if let lastModified = route.lastModified {
            headers.add(name: "Last-Modified", value: TestHTTPHandler.httpDate(lastModified))
            headers.add(name: "Date", value: TestHTTPHandler.httpDate(Date()))
        }
        if let disposition = route.contentDisposition { headers.add(name: "Content-Disposition", value: disposition) }
        for (name, value) in route.extraHeaders { headers.add(name: name, value: value) }
        if route.gzipEncoding { headers.add(name: "Content-Encoding", value: "gzip") }
        if route.alwaysNotModified || Self.notModified(head.headers, route) {
            // RFC 9110 §13.2.2: If-None-Match first; If-Modified-Since only without it.
            _ = record(304)
            sendSimple(context: context, status: .notModified, body: "", headers: headers)
            return
        }
        if route.ranges { headers.add(name: "Accept-Ranges", value: "bytes") }
        if route.ranges, let range = head.headers.first(name: "range"), range.hasPrefix("bytes=") {
            let ifRange = head.headers.first(name: "if-range")
            let validatorMatches =
                ifRange == nil || ifRange == route.etag
                || (route.lastModified.map { ifRange == TestHTTPHandler.httpDate($0) } ?? false)
            if validatorMatches {
                let spec = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
                if spec.count == 2, let first = Int(spec[0]), route.wholeBodyForRangesFrom.map({ first < $0 }) ?? true {
                    if first >= total {
                        _ = record(416)
                        sendSimple(
                            context: context, status: .rangeNotSatisfiable, body: "",
                            headers: ["Content-Range": "bytes */\(total)"])
                        return
                    }
                    start = first
                    if let last = Int(spec[1]) { end = min(total, last + 1) }
                    status = .partialContent
                    headers.add(
                        name: "Content-Range", value: route.contentRangeOverride ?? "bytes \(start)-\(end - 1)/\(total)"
                    )
                }
            }
        }
        if route.chunked {
            headers.add(name: "Transfer-Encoding", value: "chunked")
        } else {
            headers.add(name: "Content-Length", value: route.contentLengthOverride ?? "\(end - start)")
            if route.conflictingContentLength { headers.add(name: "Content-Length", value: "\(end - start + 7)") }
        }
        var served = route
        if head.headers.first(name: "range") == nil, let rate = route.bytesPerSecondWithoutRange {
            served.bytesPerSecond = rate
        }
        let index = record(Int(status.code))
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        let misbehave =
            (route.misbehaveTimes.map { count <= $0 } ?? true)
            && (!route.misbehaveRangedOnly || head.headers.first(name: "range") != nil)
        let limit = misbehave ? [route.stallAfter, route.closeAfter].compactMap { $0 }.min() : nil
        sendBody(
            context: context, route: served, from: start, to: end, sent: 0, limit: limit,
            closeAtLimit: misbehave && route.closeAfter != nil && route.closeAfter == limit, record: index)
    }

    private func sendBody(
        context: ChannelHandlerContext, route: Route, from start: Int, to end: Int, sent: Int, limit: Int?,
        closeAtLimit: Bool, record: Int
    ) {
        guard !closed else { return }
        if let limit, sent >= limit {
            context.flush()
            if closeAtLimit { context.close(promise: nil) }
            return  // stall: keep the connection open and silent
        }
        let position = start + sent
        guard position < end else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        var chunk = min(64 * 1024, end - position)
        if let limit { chunk = min(chunk, limit - sent) }
        if let rate = route.bytesPerSecond { chunk = min(chunk, max(1, rate / 20)) }
        let size = chunk
        var buffer = context.channel.allocator.buffer(capacity: size)
        buffer.writeBytes(route.content[position..<(position + size)])
        state.withLockedValue { $0.requests[record].bodyBytesSent += size }
        let next = sent + size
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).whenComplete { [self] result in
            guard case .success = result else { return }
            let context = loopBound.value
            if let rate = route.bytesPerSecond {
                let delay = TimeAmount.nanoseconds(Int64(Double(size) / Double(rate) * 1e9))
                context.eventLoop.scheduleTask(in: delay) {
                    self.sendBody(
                        context: loopBound.value, route: route, from: start, to: end, sent: next, limit: limit,
                        closeAtLimit: closeAtLimit, record: record)
                }
            } else {
                sendBody(
                    context: context, route: route, from: start, to: end, sent: next, limit: limit,
                    closeAtLimit: closeAtLimit, record: record)
            }
        }
    }

    /// Whether a conditional GET finds the client's copy current.
    static func notModified(_ headers: HTTPHeaders, _ route: Route) -> Bool {
        if let tags = headers.first(name: "if-none-match") {
            let listed = tags.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            return route.etag.map { etag in
                listed.contains("*") || listed.contains(etag) || listed.contains("W/" + etag)
            }
                ?? false
        }
        guard let since = headers.first(name: "if-modified-since"), let modified = route.lastModified,
            let date = httpDateParsed(since)
        else { return false }
        return modified.timeIntervalSince1970.rounded(.down) <= date.timeIntervalSince1970
    }

    static func httpDateParsed(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }

    private func sendSimple(
        context: ChannelHandlerContext, status: HTTPResponseStatus, body: String, headers: HTTPHeaders = [:]
    ) {
        var headers = headers
        headers.add(name: "Content-Length", value: "\(body.utf8.count)")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
        buffer.writeString(body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
