#if canImport(Glibc)
import DownloadModel
import Glibc
#endif
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import UserFiles
import FileIdentities

/// `<fcntl.h>`'s `sync_file_range` (a GNU extension Swift's Glibc module does not export).
@_silgen_name("sync_file_range")
private func sync_file_range(_ fd: Int32, _ offset: Int64, _ count: Int64, _ flags: UInt32) -> Int32
private let SYNC_FILE_RANGE_WRITE: UInt32 = 2

/// The partial file of one task, written off the event loops.
///
/// Every operation on the file (open, `pwrite`, `ftruncate`, `fdatasync`, the checksum's read-back, the final
/// rename) is one entry of a single ordered list that the task's I/O queue drains, so a
/// checkpoint always describes exactly the writes queued before it and a truncation can never
/// be overtaken by an older checkpoint (this order replaces the epoch counter the transfer
/// code once needed). The event loop only appends: `write` answers at once while fewer than
/// `highWater` bytes wait, so the network keeps reading while the disk writes, and otherwise
/// answers when the queue has caught up (backpressure).
///
/// Thread rules: `descriptor` and `failure` are touched only inside the drain (on `queue`);
/// the list and the flow counters are behind `lock`. Hence `@unchecked Sendable`. Checkpoint
/// syncs are the exception to "one queue": they run on `syncQueue` on a duplicated descriptor,
/// overlapping later writes, and a truncation in between voids them (`generation`).
final class PartialFileWriter: @unchecked Sendable {
    private enum Operation {
        case write(ByteBuffer, at: Int64)
        case perform(@Sendable () -> Void)
    }

    let path: String
    private let fileAccess: any FileAccess
    private let queue: DispatchQueue
    private let highWater: Int

    // Drain-only state.
    private var descriptor: Int32 = -1
    private var failure: DownloadError?
    /// Bytes written since writeback was last started (`startWriteback`).
    private var unsubmitted = 0
    /// The file was created by this writer's open and nothing was written to it yet: emptying
    /// it needs no `ftruncate` (drain-only).
    private var emptySinceCreated = false
    /// The open file's identity (drain-only).
    private(set) var identity: FileIdentity?
    /// The `checksum` option's digest, fed as the writes go out (drain-only).
    private var digest: RunningDigest?
    private let reuse: @Sendable () -> PartialReuse
    private let opened: @Sendable (FileIdentity) -> Void

    /// Checkpoint syncs run here, beside later writes, so the stream never waits for the disk.
    private let syncQueue: DispatchQueue
    /// Bumped by every truncation; a sync that started before one records nothing. Its lock is
    /// held while a checkpoint is recorded (the lock order is in `SessionManager`).
    private let generation = NIOLockedValueBox<UInt64>(0)

    // Shared state.
    private let lock = NIOLock()
    private var operations: [Operation] = []
    private var draining = false
    private var pendingBytes = 0
    private var waiters: [EventLoopPromise<Void>] = []
    private var sharedFailure: DownloadError?

    /// The most gathered before the queue is woken (`WriteGathering` says how much, now).
    private let gatherCeiling: Int

    /// `reuse` says whether an existing file may be kept when the file is opened; `opened` hears
    /// which file was opened (to record it).
    init(
        path: String, fileAccess: any FileAccess, queue: DispatchQueue, highWater: Int = 4 << 20,
        digest: Checksum.Algorithm? = nil,
        reuse: @escaping @Sendable () -> PartialReuse = { .ifOwned },
        opened: @escaping @Sendable (FileIdentity) -> Void = { _ in }
    ) {
        self.reuse = reuse
        self.opened = opened
        self.digest = digest.map { RunningDigest($0) }
        gatherCeiling = highWater / 2
        WriteGathering.writerMade()
        self.path = path
        self.fileAccess = fileAccess
        self.queue = queue
        self.highWater = highWater
        self.syncQueue = DispatchQueue(label: "org.example.Downloads.sync")
    }

    deinit {
        WriteGathering.writerGone()
        if descriptor >= 0 { Glibc.close(descriptor) }
    }

    // MARK: From the event loop

    /// Queues `buffer` for `offset`; the future is the backpressure (and carries a write error).
    func write(_ buffer: ByteBuffer, at offset: Int64, eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let (failed, waiter): (DownloadError?, EventLoopPromise<Void>?) = lock.withLock {
            if let sharedFailure { return (sharedFailure, nil) }
            operations.append(.write(buffer, at: offset))
            pendingBytes += buffer.readableBytes
            // Writes gather until `WriteGathering`'s share waits: one wake-up and one pwritev for many
            // chunks. Every other operation (a checkpoint, the end of a request, a stop) wakes
            // the queue at once, so nothing is left behind.
            if pendingBytes >= WriteGathering.bytes(ceiling: gatherCeiling) { scheduleDrainLocked() }
            guard pendingBytes > highWater else { return (nil, nil) }
            let promise = eventLoop.makePromise(of: Void.self)
            waiters.append(promise)
            return (nil, promise)
        }
        if let failed { return eventLoop.makeFailedFuture(failed) }
        return waiter?.futureResult ?? eventLoop.makeSucceededVoidFuture()
    }

    /// Queues `body` after everything queued so far and completes the future with its result.
    func perform(
        on eventLoop: EventLoop, _ body: @escaping @Sendable (PartialFileWriter) throws -> Void
    ) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        enqueue { writer in promise.completeWith(Result { try body(writer) }) }
        return promise.futureResult
    }

    // MARK: From tasks

    /// Queues `body` after everything queued so far; returns its result.
    func perform<T: Sendable>(_ body: @escaping @Sendable (PartialFileWriter) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            enqueue { writer in continuation.resume(with: Result { try body(writer) }) }
        }
    }

    /// Queues `body` without waiting for it.
    func enqueue(_ body: @escaping @Sendable (PartialFileWriter) -> Void) {
        lock.withLock {
            operations.append(.perform { body(self) })
            scheduleDrainLocked()
        }
    }

    /// Queues a checkpoint after everything queued so far: the writes before it are done when it
    /// is reached, and an fdatasync of a duplicate of the descriptor then runs on the sync queue
    /// while later writes carry on. `durable` is called once the sync succeeded, unless the file
    /// was truncated meanwhile; `failed` when a write or the sync failed.
    func checkpoint(durable: @escaping @Sendable () -> Void, failed: @escaping @Sendable (DownloadError) -> Void) {
        let syncQueue = self.syncQueue
        let generation = self.generation
        enqueue { writer in
            if let failure = writer.failure { return failed(failure) }
            guard writer.descriptor >= 0 else { return }
            let copy = dup(writer.descriptor)
            guard copy >= 0 else { return failed(.file("cannot sync \(writer.path): \(errnoText())")) }
            let started = generation.withLockedValue { $0 }
            let path = writer.path
            syncQueue.async {
                let result = fdatasync(copy)
                let error = result == 0 ? nil : DownloadError.file("cannot sync \(path): \(errnoText())")
                Glibc.close(copy)
                if let error { return failed(error) }
                // No lock is held while `durable` runs: a truncation waits for this queue
                // (`truncate(to:)`), so none can come between this check and the recording.
                if generation.withLockedValue({ $0 }) == started { durable() }
            }
        }
    }

    /// Inside a `perform` body: waits until every checkpoint sync started before has finished
    /// and recorded, so what follows (a failure, a stop) sees the last durable offset.
    func awaitCheckpoints() {
        syncQueue.sync {}
    }

    private func scheduleDrainLocked() {
        guard !draining else { return }
        draining = true
        queue.async { self.drain() }
    }

    private func drain() {
        var batch: [Operation] = []
        var run: [(ByteBuffer, Int64)] = []
        while true {
            batch.removeAll(keepingCapacity: true)
            let more: Bool = lock.withLock {
                if operations.isEmpty {
                    draining = false
                    return false
                }
                swap(&batch, &operations)
                return true
            }
            guard more else { return }
            var written = 0
            // Writes that follow each other in the file go out as one pwritev.
            func flush() {
                guard !run.isEmpty else { return }
                defer { run.removeAll(keepingCapacity: true) }
                guard self.failure == nil else { return }
                do {
                    try openIfNeeded()
                    emptySinceCreated = false
                    try writeRun(run)
                    if digest != nil {
                        for (buffer, offset) in run {
                            buffer.withUnsafeReadableBytes { digest?.wrote($0, at: offset) }
                        }
                    }
                } catch {
                    self.failure = error as? DownloadError ?? .file("\(error)")
                }
            }
            for operation in batch {
                switch operation {
                case .write(let buffer, let offset):
                    written += buffer.readableBytes
                    if let last = run.last,
                        last.1 + Int64(last.0.readableBytes) != offset || run.count == PartialFileWriter.maxIOVecs
                    {
                        flush()
                    }
                    run.append((buffer, offset))
                case .perform(let body):
                    flush()
                    body()
                }
            }
            flush()
            startWriteback(after: written)
            let failed = self.failure
            let wake: [EventLoopPromise<Void>] = lock.withLock {
                pendingBytes -= written
                if let failed { sharedFailure = failed }
                guard failed != nil || pendingBytes <= highWater / 2 else { return [] }
                defer { waiters = [] }
                return waiters
            }
            for promise in wake {
                if let failed { promise.fail(failed) } else { promise.succeed() }
            }
        }
    }

    // MARK: On the queue (inside `perform` bodies)

    /// The first write error, if any (later writes were dropped).
    var writeFailure: DownloadError? { failure }

    func openIfNeeded() throws {
        guard descriptor < 0 else { return }
        let file = try fileAccess.openPartial(path, reuse: reuse())
        descriptor = file.descriptor
        identity = file.identity
        emptySinceCreated = file.created
        opened(file.identity)
    }

    var size: Int64 {
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0 else { return 0 }
        return Int64(info.st_size)
    }

    func truncate(to length: Int64) throws {
        try openIfNeeded()
        // Every checkpoint whose sync started before has recorded itself (or been voided)
        // before the file changes; those that start later see the new generation.
        syncQueue.sync {}
        generation.withLockedValue { $0 += 1 }
        digest?.truncated(to: length)
        if emptySinceCreated && length == 0 { return }
        emptySinceCreated = false
        guard ftruncate(descriptor, off_t(length)) == 0 else {
            throw DownloadError.file("cannot truncate \(path): \(errnoText())")
        }
    }

    /// Makes everything written so far durable; a write error since the last sync fails it.
    func sync() throws {
        if let failure { throw failure }
        guard descriptor >= 0 else { return }
        guard fdatasync(descriptor) == 0 else { throw DownloadError.file("cannot sync \(path): \(errnoText())") }
    }

    /// The digest of the first `length` bytes (hex): what was written in order during this run
    /// was hashed as it went out; the rest is read back through the open descriptor (never by
    /// path). Returns the bytes read back too (a benchmark's figure).
    func digest(length: Int64) throws -> (hex: String, readBack: Int64)? {
        guard var digest else { return nil }
        try openIfNeeded()
        let descriptor = self.descriptor
        let path = self.path
        let hex = try digest.finish(length: length) { offset, buffer in
            while true {
                let n = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
                if n >= 0 { return n }
                if errno != EINTR { throw DownloadError.file("cannot read \(path) to verify it: \(errnoText())") }
            }
        }
        self.digest = digest
        return (hex, digest.readBack)
    }

    /// The digest of the bytes of `range` (hex), read back through the open descriptor: a
    /// piece's check, queued after the writes that completed it.
    func digest(of range: ByteRange, _ algorithm: Checksum.Algorithm) throws -> String {
        if let failure { throw failure }
        try openIfNeeded()
        let descriptor = self.descriptor
        let path = self.path
        var digest = RunningDigest(algorithm, from: range.start)
        return try digest.finish(length: range.end) { offset, buffer in
            while true {
                let n = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
                if n >= 0 { return n }
                if errno != EINTR { throw DownloadError.file("cannot read \(path) to verify a piece: \(errnoText())") }
            }
        }
    }

    /// Starts hashing with `algorithm` (a digest learned from the response's head): what was
    /// written before is read back at the end.
    func startDigest(_ algorithm: Checksum.Algorithm) {
        guard digest == nil else { return }
        digest = RunningDigest(algorithm)
    }

    func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    /// Buffers per pwritev (IOV_MAX is 1024 on Linux).
    static let maxIOVecs = 256

    /// Bytes written between two starts of writeback.
    static let writebackBytes = 8 << 20
    /// Starts writeback of the file's dirty pages every `writebackBytes` (without waiting for
    /// it), so the disk writes while the network reads: the final fdatasync (and each checkpoint)
    /// then finds little left to write, and the download never fills the page cache with dirty
    /// pages that stall the rest of the desktop when the kernel flushes them. It may block
    /// while the disk's queue is full: on this queue, that is backpressure. A no-op on tmpfs.
    private func startWriteback(after written: Int) {
        guard descriptor >= 0, failure == nil else { return }
        unsubmitted += written
        guard unsubmitted >= PartialFileWriter.writebackBytes else { return }
        unsubmitted = 0
        // Errors surface at the next fdatasync; this is only a hint.
        _ = sync_file_range(descriptor, 0, 0, SYNC_FILE_RANGE_WRITE)
    }

    /// Writes contiguous buffers, the first at its offset, with one pwritev when it can. The
    /// buffers stay alive in `run` for the call, so their storage does too.
    private func writeRun(_ run: [(ByteBuffer, Int64)]) throws {
        guard run.count > 1, let start = run.first?.1 else {
            for (buffer, offset) in run { try buffer.withUnsafeReadableBytes { try write($0, at: offset) } }
            return
        }
        var vectors: [iovec] = []
        vectors.reserveCapacity(run.count)
        var total = 0
        for (buffer, _) in run {
            buffer.withUnsafeReadableBytes { bytes in
                vectors.append(
                    iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count))
            }
            total += buffer.readableBytes
        }
        var n: Int
        repeat {
            n = pwritev(descriptor, vectors, Int32(vectors.count), off_t(start))
        } while n < 0 && errno == EINTR
        if n < 0 { throw DownloadError.file("cannot write \(path): \(errnoText())") }
        guard n < total else { return }
        // A short write: the rest one buffer at a time, from where it stopped.
        var done = n
        for (buffer, offset) in run {
            let length = buffer.readableBytes
            let end = Int(offset - start) + length
            guard end > done else { continue }
            let skip = max(0, done - Int(offset - start))
            try buffer.withUnsafeReadableBytes { bytes in
                try write(UnsafeRawBufferPointer(rebasing: bytes[skip...]), at: offset + Int64(skip))
            }
            done = end
        }
    }

    private func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        try writeFully(descriptor, bytes, at: offset, failure: "cannot write \(path)")
    }
}
