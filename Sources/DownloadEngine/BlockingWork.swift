import Dispatch

/// Calls that block a thread for long (getaddrinfo, a delay probe's handshake) made off the
/// caller's thread, never on `DispatchQueue.global()`: that pool is as wide as the cores and does
/// not grow while its threads block, so on two cores two background tasks' delay probes waiting
/// on a full link (up to a second each) held back every DNS lookup and every `Start`'s
/// destination check, which run there. Here each call runs on a serial queue of its own on
/// libdispatch's overcommitting pool, which adds a thread while others block.
enum BlockingWork {
    /// `body`'s result, from a thread that may block.
    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            start { continuation.resume(returning: body()) }
        }
    }

    /// Starts `body` on a queue of its own and returns at once.
    static func start(_ body: @escaping @Sendable () -> Void) {
        DispatchQueue(label: "org.example.Downloads.blocking").async(execute: body)
    }
}
