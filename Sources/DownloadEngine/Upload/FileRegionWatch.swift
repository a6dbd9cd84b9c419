import DownloadModel
import NIOConcurrencyHelpers
import NIOCore

/// The descriptor one upload body's file regions read (`FileRegions`), and the one place it is
/// closed. Looked at on the body's event loop every `interval` from the first region on:
/// - once nothing but the watch holds it (the channel and AsyncHTTPClient let go of a region when
///   its write ended, succeeded or failed), it is closed and the watch stops;
/// - when the file no longer reaches the end of the regions handed out (cut short while sent),
///   it is closed at once: `sendfile` would send nothing and NIO would try again for ever, and a
///   closed handle fails the region's write instead, which ends the connection.
/// A close NIO refuses because it is reading the descriptor that moment (EBUSY) is tried again at
/// the next look.
final class FileRegionWatch: Sendable {
    static let interval = TimeAmount.milliseconds(100)

    private struct State {
        var handle: NIOFileHandle?
        /// The end of the regions handed out.
        var end: Int64 = 0
        var looking: RepeatedTask?
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

    /// A region of the file's `bytes`, on the watched descriptor; nil once the file was found
    /// cut short.
    func region(_ bytes: Range<Int64>) -> FileRegion? {
        state.withLockedValue { state in
            guard let handle = state.handle else { return nil }
            state.end = max(state.end, bytes.upperBound)
            if state.looking == nil {
                // The look holds the watch until it stops (below).
                state.looking = loop.scheduleRepeatedTask(initialDelay: Self.interval, delay: Self.interval) { _ in
                    self.look()
                }
            }
            return FileRegion(fileHandle: handle, readerIndex: Int(bytes.lowerBound), endIndex: Int(bytes.upperBound))
        }
    }

    private func look() {
        let size = source.identity?.size ?? 0
        state.withLockedValue { state in
            guard var handle = state.handle else { return }
            state.handle = nil
            if isKnownUniquelyReferenced(&handle) || size < state.end {
                do {
                    try handle.close()
                    state.looking?.cancel()
                    state.looking = nil
                    return
                } catch {
                    // EBUSY: NIO is reading it this moment; the next look tries again.
                }
            }
            state.handle = handle
        }
    }

    deinit {
        // Only reached once every region and the look let go: close what is left.
        if let handle = state.withLockedValue({ $0.handle }) { try? handle.close() }
    }
}
