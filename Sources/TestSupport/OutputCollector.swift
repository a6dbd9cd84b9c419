import Foundation

/// Reads a child's output as it is written, so a test can wait for a line and then stop the
/// child, instead of sleeping and reading the pipe whole after the exit.
///
/// The reads block, so they run on a thread of their own: in the cooperative pool (as wide as
/// the cores) two collectors would take every thread of a 2-core machine, and nothing else of
/// the test would run until their children exit.
public final class OutputCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var collected = ""
    private var ended = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Starts reading `handle` until end of file.
    public init(_ handle: FileHandle) {
        let thread = Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                lock.withLock { collected += String(decoding: data, as: UTF8.self) }
            }
            let waiting = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
                ended = true
                defer { waiters = [] }
                return waiters
            }
            for waiter in waiting { waiter.resume() }
        }
        thread.name = "OutputCollector"
        thread.start()
    }

    /// What has been read so far.
    public var text: String { lock.withLock { collected } }

    /// Waits until the writer closed its end (the child exited), then returns everything.
    public func finish() async -> String {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lock.withLock { () -> Bool in
                if ended { return true }
                waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
        return text
    }
}
