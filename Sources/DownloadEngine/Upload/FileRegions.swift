import AsyncHTTPClient
import DownloadModel
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// An upload's file bytes sent as NIO file regions over a plain `http://` connection: the event
/// loop hands each region to `sendfile(2)` and the kernel copies the bytes from the page cache
/// to the socket (nginx sends files so); the process never reads them.
///
/// The ways this went wrong when first tried (Benchmarks/RESULTS.md, "Uploads"), and what keeps
/// each away:
/// - A region is only ever written where no TLS is: NIOSSL takes bytes, not regions, and the
///   daemon would stop on the first one. `apply(to:)` says yes to `http://` only; every route
///   such a URL takes is a plain socket (AsyncHTTPClient's own, a forwarded request through an
///   HTTP proxy, a SOCKS tunnel; a proxy is never reached over TLS: `ProxySetting`).
/// - A body writer's future is AsyncHTTPClient's backpressure (the connection can take more),
///   not the write's end: a region may still wait in the channel's queue after it. So the
///   regions' descriptor (one duplicate a body) is closed by `FileRegionWatch` only once the last
///   region was made and nothing but the watch holds it (NIO and AsyncHTTPClient let go of a
///   region when its write ended either way), never at a future.
/// - `sendfile` at the file's end sends nothing and NIO tries again at once, for ever: a file cut
///   short while it is sent would spin the loop. The watch looks at the file's size while regions
///   are out and closes the descriptor when the file no longer reaches them: NIO's next write of
///   one fails, which closes the connection, and the attempt ends `SourceChanged`.
///
/// Regions are sized to about a quarter second of what the connection took so far, between
/// 64 KiB and `largest` (progress and the stall watchdog count a region when it was written);
/// with a bandwidth limit, a quarter of the limit, held back by `UploadBody.Pace`.
struct FileRegions {
    static let smallest = 64 * 1024
    static let largest = 4 * 1024 * 1024
    /// The first region's size, before the connection's rate is known.
    static let first = 256 * 1024

    let source: SourceFile
    let path: String
    /// The file's size when the upload was made (for the error's text).
    let recordedSize: Int64

    /// True when a body to `url` may go as file regions: plain `http://` only.
    static func apply(to url: String) -> Bool {
        url.prefix(7).lowercased() == "http://"
    }

    /// True when the kernel can `sendfile` from `source`: one byte sent to /dev/null. A file
    /// system without it (EINVAL) would fail every attempt's first region; its file is read into
    /// buffers instead.
    static func canSend(from source: SourceFile) -> Bool {
        guard let sink = nullDevice else { return false }
        var offset: off_t = 0
        return sendfile(sink, source.descriptor, &offset, 1) >= 0
    }

    /// /dev/null, opened once for `canSend`.
    private static let nullDevice: Int32? = {
        let fd = open("/dev/null", O_WRONLY | O_CLOEXEC)
        return fd >= 0 ? fd : nil
    }()

    /// Sends the file's bytes in `range`, each region once the connection took the last (its
    /// writer's future).
    func send(
        _ range: Range<Int64>, through writer: HTTPClient.Body.StreamWriter, on loop: EventLoop, limit: RateLimit
    ) async throws {
        let copy = SourceFile.duplicate(source.descriptor)
        guard copy >= 0 else { throw DownloadError.file("cannot send the file to upload: \(errnoText())") }
        let watch = FileRegionWatch(descriptor: copy, source: source, on: loop)
        watch.start()
        defer { watch.done() }
        var pace = UploadBody.Pace()
        var offset = range.lowerBound
        let started = NIODeadline.now()
        while offset < range.upperBound {
            let count = min(
                Int64(size(limit: limit.bytesPerSecond, sent: offset - range.lowerBound, since: started)),
                range.upperBound - offset)
            guard let region = watch.region(offset..<offset + count) else {
                throw DownloadError.sourceChanged(
                    path, "it ends at byte \(source.identity?.size ?? 0) of \(recordedSize)")
            }
            offset += count
            try await writer.write(.fileRegion(region)).get()
            try await pace.hold(after: Int(count)) { limit.bytesPerSecond }
        }
    }

    /// The next region's size: a quarter of the limit, or a quarter second at the rate so far.
    private func size(limit: UInt64, sent: Int64, since started: NIODeadline) -> Int {
        if limit > 0 { return UploadBody.paced(limit, ceiling: Self.largest) }
        guard sent > 0 else { return Self.first }
        let seconds = max(Double((NIODeadline.now() - started).nanoseconds) / 1e9, 0.001)
        let quarter = Int(Double(sent) / seconds / 4)
        return min(Self.largest, max(Self.smallest, quarter / Self.smallest * Self.smallest))
    }
}
