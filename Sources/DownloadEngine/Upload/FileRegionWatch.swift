import DownloadModel
import NIOConcurrencyHelpers
import NIOCore

/// The descriptor one upload body's file regions read (`FileRegions`), and the one place it is
/// closed. Looked at on the body's event loop every `interval` once started:
/// - once the sender is done (`done()`) and nothing but the watch holds the descriptor (the
///   channel and AsyncHTTPClient let go of a region when its write ended, succeeded or failed),
///   it is closed and the watch stops. Not before the sender is done: between two regions the
///   watch may be the only holder while more are still to come.
/// - when the file no longer reaches the end of the regions handed out (cut short while sent),
///   it is closed at once: `sendfile` would send nothing and NIO would try again for ever, and a
///   closed handle fails the region's write instead, which ends the connection; no region is
///   made after that.
/// A close NIO refuses because it is reading the descriptor that moment (EBUSY) is tried again at
/// the next look. The lock is a leaf and covers bookkeeping only: the size is read and the
/// descriptor closed outside it.
final class FileRegionWatch: Sendable {
    static let interval = TimeAmount.milliseconds(100)

    private struct State {
        var handle: NIOFileHandle?
        /// The end of the regions handed out.
        var end: Int64 = 0
        /// The sender made its last region (or stopped).
        var done = false
        /// Closed, or being closed: no more regions.
        var closed = false
    }

    private let state: NIOLockedValueBox<State>
    private let source: SourceFile
    private let loop: EventLoop

    /// Takes ownership of `descriptor` (a duplicate of `source`'s).
    init(descriptor: Int32, source: SourceFile, on loop: EventLoop) {
        state = NIOLockedValueBox(State(handle: NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)))
        self.source = source
        self.loop = loop
    }

    /// Starts the looks; each holds the watch until the descriptor is closed.
    func start() {
        loop.scheduleRepeatedTask(initialDelay: Self.interval, delay: Self.interval) { task in
            self.look(task)
        }
    }

    /// A region of the file's `bytes`, on the watched descriptor; nil once the file was found
    /// cut short.
    func region(_ bytes: Range<Int64>) -> FileRegion? {
        state.withLockedValue { state in
            guard !state.closed, let handle = state.handle else { return nil }
            state.end = max(state.end, bytes.upperBound)
            return FileRegion(fileHandle: handle, readerIndex: Int(bytes.lowerBound), endIndex: Int(bytes.upperBound))
        }
    }

    /// The sender made its last region or stopped.
    func done() {
        state.withLockedValue { $0.done = true }
    }

    private func look(_ task: RepeatedTask) {
        let size = source.identity?.size ?? 0
        let closing: NIOFileHandle? = state.withLockedValue { state in
            guard !state.closed, var handle = state.handle else { return nil }
            state.handle = nil
            if (state.done && isKnownUniquelyReferenced(&handle)) || size < state.end {
                state.closed = true
                return handle
            }
            state.handle = handle
            return nil
        }
        guard let closing else {
            if state.withLockedValue({ $0.closed && $0.handle == nil }) { task.cancel() }
            return
        }
        do {
            try closing.close()
            task.cancel()
        } catch {
            // EBUSY: NIO is reading it this moment; the next look tries again.
            state.withLockedValue { state in
                state.handle = closing
                state.closed = false
            }
        }
    }

    deinit {
        // Only reached once the looks let go (or never started): close what is left.
        if let handle = state.withLockedValue({ $0.handle }) { try? handle.close() }
    }
}
