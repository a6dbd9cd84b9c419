import FileIdentities
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// One connection's requests to the share server, answered as Passim answers them: 200 with the
/// file (206 for one byte range, 416 for one past its end), 400 without a `sha256=`, 406 for a
/// malformed one, 403 for a hash not offered here, for an address over its `AddressBudget`, and
/// for a file that is no longer what was shared (another inode, size or modification time: it is
/// withdrawn then, and no byte of it is sent). The request's path is a label only: the file is
/// found by its hash, so `..` or any name reaches nothing.
final class ShareRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Bytes read from the file at once (and written to the connection before the next read).
    static let chunk = 256 << 10

    private let index: ShareIndex
    private let budget: AddressBudget
    private let clock: @Sendable () -> (wall: Int64, monotonic: Double)
    private let open: ShareServer.Opener
    private var head: HTTPRequestHead?
    private var sending = false

    init(
        index: ShareIndex, budget: AddressBudget, clock: @escaping @Sendable () -> (wall: Int64, monotonic: Double),
        open: @escaping ShareServer.Opener
    ) {
        self.index = index
        self.budget = budget
        self.clock = clock
        self.open = open
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head, !sending else { return }
            self.head = nil
            answer(head, context: context)
        }
    }

    private func answer(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let address = context.channel.remoteAddress?.ipAddress ?? "?"
        let now = clock()
        guard budget.take(address, now: now.monotonic) else {
            return refuse(head, 403, "too many requests from \(address)", context: context)
        }
        switch PassimRequest.parse(method: head.method.rawValue, target: head.uri) {
        case .refused(let status, let reason):
            refuse(head, status, reason, context: context)
        case .file(let sha256, _):
            guard let file = index.offered(sha256, at: now.wall) else {
                return refuse(head, 403, "\(sha256) is not offered here", context: context)
            }
            // Opened off the event loop: as its owner, through a file helper on the system bus.
            sending = true
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { [open] in
                file.openIfUnchanged(with: open)
            }.whenComplete { result in
                let (handler, context) = bound.value
                handler.sending = false
                guard case .success(let opened) = result, let descriptor = opened else {
                    // Gone or changed since it was shared: never served again.
                    if case .success = result { handler.index.remove(file.sha256, owner: 0, reason: .changed) }
                    return handler.refuse(head, 403, "\(sha256) is not offered here", context: context)
                }
                handler.serve(file, descriptor: descriptor, head, context: context)
            }
        }
    }

    private func serve(
        _ file: SharedFile, descriptor: Int32, _ request: HTTPRequestHead, context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "Content-Disposition", value: "attachment; filename=\"\(Self.escaped(file.name))\"")
        headers.add(name: "Accept-Ranges", value: "bytes")
        // The hash is the strongest validator there is: a client may split its download over ranges.
        headers.add(name: "ETag", value: "\"\(file.sha256)\"")
        let status: HTTPResponseStatus
        let first: Int64
        let count: Int64
        switch RangeRequest.parse(request.headers.first(name: "range"), size: file.size) {
        case .whole:
            (status, first, count) = (.ok, 0, file.size)
        case .bytes(let from, let last):
            (status, first, count) = (.partialContent, from, last - from + 1)
            headers.add(name: "Content-Range", value: "bytes \(from)-\(last)/\(file.size)")
        case .unsatisfiable:
            close(descriptor)
            var refused = HTTPHeaders()
            refused.add(name: "Content-Range", value: "bytes */\(file.size)")
            return refuse(request, 416, "the range is past the file's end", headers: refused, context: context)
        }
        headers.add(name: "Content-Length", value: String(count))
        let keepAlive = request.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
            promise: nil)
        guard request.method != .HEAD, count > 0 else {
            close(descriptor)
            return finish(keepAlive: keepAlive, context: context)
        }
        sending = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        send(descriptor, from: first, left: count, sha256: file.sha256, keepAlive: keepAlive, bound)
    }

    /// Reads the next chunk off the event loop, writes it, and goes on once it is written.
    private func send(
        _ descriptor: Int32, from offset: Int64, left: Int64, sha256: String, keepAlive: Bool,
        _ bound: NIOLoopBound<(ShareRequestHandler, ChannelHandlerContext)>
    ) {
        let (_, context) = bound.value
        let size = Int(min(left, Int64(Self.chunk)))
        let allocator = context.channel.allocator
        NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { () throws -> ByteBuffer in
            var buffer = allocator.buffer(capacity: size)
            let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
                max(0, pread(descriptor, raw.baseAddress, size, off_t(offset)))
            }
            guard read > 0 else { throw ShareReadError() }
            return buffer
        }.flatMap { buffer -> EventLoopFuture<Int> in
            let (handler, context) = bound.value
            let bytes = buffer.readableBytes
            return context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(buffer)))).map { bytes }
        }.whenComplete { result in
            let (handler, context) = bound.value
            switch result {
            case .success(let bytes):
                handler.index.served(sha256, bytes: Int64(bytes))
                if left - Int64(bytes) > 0 {
                    handler.send(
                        descriptor, from: offset + Int64(bytes), left: left - Int64(bytes), sha256: sha256,
                        keepAlive: keepAlive, bound)
                    return
                }
                close(descriptor)
                handler.sending = false
                handler.finish(keepAlive: keepAlive, context: context)
            case .failure:
                // The file shrank under us or the client went away: the answer cannot be whole.
                close(descriptor)
                handler.sending = false
                context.close(promise: nil)
            }
        }
    }

    private func refuse(
        _ request: HTTPRequestHead, _ code: Int, _ reason: String, headers extra: HTTPHeaders = HTTPHeaders(),
        context: ChannelHandlerContext
    ) {
        let body = ByteBuffer(string: reason + "\n")
        var headers = extra
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        let keepAlive = request.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        let head = HTTPResponseHead(
            version: request.version, status: HTTPResponseStatus(statusCode: code), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if request.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        finish(keepAlive: keepAlive, context: context)
    }

    private func finish(keepAlive: Bool, context: ChannelHandlerContext) {
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }

    /// A name as a quoted header value: `"`, `\`, `%` and bytes outside printable ASCII
    /// percent-encoded (as Passim's `g_uri_escape_string`), so a server-chosen name cannot end the
    /// header or the quotes.
    static func escaped(_ name: String) -> String {
        var out = ""
        for byte in name.utf8 {
            if byte >= 0x20, byte < 0x7f, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"),
                byte != UInt8(ascii: "%")
            {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

/// A read of a shared file that returned no bytes before its answer was whole.
struct ShareReadError: Error {}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
