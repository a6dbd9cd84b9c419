import AsyncHTTPClient
import DownloadModel
import NIOCore

/// An upload's request body, streamed from its file: the form's head, the file's bytes read on
/// the task's I/O queue a chunk at a time (each written once the connection took the last: its
/// future is the backpressure), the form's end. The bandwidth limit (the task's own, a
/// background transfer's pace, its group's share: `RateLimit`, read per
/// chunk) holds the next chunk back. A file that ends before the size recorded at `Upload`
/// ends the body with `SourceChanged`. On a plain `http://` connection the file's bytes go as
/// file regions instead (`FileRegions`: the kernel copies them from the page cache to the socket
/// with `sendfile(2)`, as nginx sends files); over TLS they must pass through the process.
enum UploadBody {
    static let largestChunk = 256 * 1024
    static let smallestChunk = 4 * 1024

    /// What goes at once under a rate limit of `limit` bytes a second: a quarter of it, at least
    /// `smallestChunk`, at most `ceiling` (a read's chunk, a file region), so the pace is kept
    /// a few times a second.
    static func paced(_ limit: UInt64, ceiling: Int) -> Int {
        Int(min(UInt64(ceiling), max(UInt64(smallestChunk), limit / 4)))
    }

    /// A body this small goes whole, with its head, when no rate limit holds it back.
    static let wholeLimit: Int64 = 1 << 20

    /// The whole body in one buffer (the form's head, the file, the form's end), read now, for a
    /// body of at most `wholeLimit` bytes that no bandwidth limit paces; nil otherwise (stream
    /// it: `make`). AsyncHTTPClient writes it with the request's head, as curl sends a small body;
    /// a streamed body whose response ended before the stream's end was seen leaves its pooled
    /// connection waiting for ever (1 MiB replies over kept-alive connections:
    /// Benchmarks/RESULTS.md, "Kept replies"). A file shorter than recorded is `SourceChanged`.
    static func whole(_ spec: UploadSpec, from source: SourceFile, run start: RunStart) async throws -> HTTPClient.Body?
    {
        guard spec.bodyLength <= wholeLimit, start.limit.bytesPerSecond == 0, !start.record.options.background else {
            return nil
        }
        let size = spec.identity.size
        var file = try await start.io.perform { try source.read(Int(size), at: 0) }
        guard Int64(file.readableBytes) == size else {
            throw DownloadError.sourceChanged(spec.source, "it ends at byte \(file.readableBytes) of \(size)")
        }
        var buffer = ByteBuffer(bytes: spec.bodyPrefix)
        buffer.writeBuffer(&file)
        buffer.writeBytes(spec.bodySuffix)
        return .byteBuffer(buffer)
    }

    /// The whole body, sent to `url`; or, with `range`, only those bytes of the file (a resumable
    /// upload's part: no form around it).
    static func make(
        _ spec: UploadSpec, from source: SourceFile, run start: RunStart, to url: String, range: Range<Int64>? = nil
    ) -> HTTPClient.Body {
        let (io, limit) = (start.io, start.limit)
        let prefix = range == nil ? spec.bodyPrefix : [], suffix = range == nil ? spec.bodySuffix : []
        let first = range?.lowerBound ?? 0, size = range?.upperBound ?? spec.identity.size, path = spec.source
        let length = range.map { $0.upperBound - $0.lowerBound } ?? spec.bodyLength
        let regions = FileRegions.apply(to: url)
        return .stream(contentLength: length) { writer in
            // AsyncHTTPClient does not say which loop the request is on: an empty write tells.
            writer.write(.byteBuffer(ByteBuffer())).flatMapWithEventLoop { _, loop in
                let promise = loop.makePromise(of: Void.self)
                promise.completeWithTask {
                    if !prefix.isEmpty { try await writer.write(.byteBuffer(ByteBuffer(bytes: prefix))).get() }
                    if regions, FileRegions.canSend(from: source) {
                        let sender = FileRegions(source: source, path: path, recordedSize: spec.identity.size)
                        try await sender.send(first..<size, through: writer, on: loop, limit: limit)
                        if !suffix.isEmpty { try await writer.write(.byteBuffer(ByteBuffer(bytes: suffix))).get() }
                        return
                    }
                    var pace = Pace()
                    var offset = first
                    // The next chunk is read while this one is written (one read ahead): the
                    // file and the socket are busy at once, as a reader thread and a writer
                    // thread would keep them.
                    func read(at start: Int64, limit: UInt64) -> Task<ByteBuffer, Error>? {
                        guard start < size else { return nil }
                        let chunk = limit == 0 ? largestChunk : paced(limit, ceiling: largestChunk)
                        let count = Int(min(Int64(chunk), size - start))
                        return Task { try await io.perform { try source.read(count, at: start) } }
                    }
                    var next = read(at: first, limit: limit.bytesPerSecond)
                    while let reading = next {
                        let buffer = try await reading.value
                        guard buffer.readableBytes > 0 else {
                            throw DownloadError.sourceChanged(
                                path, "it ends at byte \(offset) of \(spec.identity.size)")
                        }
                        offset += Int64(buffer.readableBytes)
                        next = read(at: offset, limit: limit.bytesPerSecond)
                        do {
                            try await writer.write(.byteBuffer(buffer)).get()
                            try await pace.hold(after: buffer.readableBytes) { limit.bytesPerSecond }
                        } catch {
                            next?.cancel()
                            throw error
                        }
                    }
                    if !suffix.isEmpty { try await writer.write(.byteBuffer(ByteBuffer(bytes: suffix))).get() }
                }
                return promise.futureResult
            }
        }
    }

    /// Holds a body back to the task's limit by the download's rule (`BodyProgress`): what went
    /// since the limit last changed against the time it should have taken, bytes owed at an old
    /// limit carried to the new one, and the wait taken in steps that read the limit again, so a
    /// limit raised or lifted while it waits applies at once.
    struct Pace {
        private var rule: BodyProgress

        init() {
            let now = NIODeadline.now()
            rule = BodyProgress(
                settings: .seconds(
                    connectTimeout: BodyProgress.longest, stallTimeout: BodyProgress.longest, lowSpeedLimit: 0,
                    lowSpeedTime: BodyProgress.longest, checkpointBytes: .max, checkpointInterval: BodyProgress.longest),
                now: now)
            rule.sendingBody(limit: 0, at: now)
        }

        /// `count` bytes went; waits until they fit under `limit` (read again at each step).
        mutating func hold(after count: Int, limit: () -> UInt64) async throws {
            rule.limitChanged(to: limit(), at: .now())
            guard rule.throttle(Int64(count), at: .now()) != nil else { return }
            while let step = rule.rateWaitStep(limit: limit(), at: .now()) {
                let wait = step - .now()
                if wait > .zero { try await Task.sleep(for: .nanoseconds(wait.nanoseconds)) }
            }
        }
    }
}
