import Dispatch
import DownloadModel

/// Calls that block a thread for long (getaddrinfo, a delay probe's handshake, a user's file
/// helper answering a `Start`'s destination check) made off the caller's thread, never on
/// `DispatchQueue.global()`: on Linux that is the pool Swift's tasks run on, as wide as the
/// cores, and it adds a thread only about once a second while its threads block. On two cores two
/// background tasks' delay probes waiting on a full link (up to a second each) held back every
/// DNS lookup; thirty `Start`s of one user whose file helper hung held back every other call and
/// transfer of the daemon until the helper's timeout. Here each call runs on a serial queue of
/// its own on libdispatch's overcommitting pool, which adds a thread while others block.
public enum BlockingWork {
    /// `body`'s result, from a thread that may block.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            start { continuation.resume(returning: body()) }
        }
    }

    /// `body`'s result or error, from a thread that may block.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            start { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Starts `body` on a queue of its own and returns at once.
    static func start(_ body: @escaping @Sendable () -> Void) {
        DispatchQueue(label: "org.example.Downloads.blocking").async(execute: body)
    }
}
