import NIOConcurrencyHelpers

/// Asks a worker to look again, coalescing: however many `poke()`s arrive while one is waiting,
/// the worker runs once for them, and never twice at the same time. What it should look at is
/// read when it runs, not carried by the poke.
final class WorkTrigger: Sendable {
    private let pending = NIOLockedValueBox(false)
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Void.self)
    }

    /// Starts the worker: `body` runs once per coalesced poke until `finish()`.
    func run(_ body: @escaping @Sendable () async -> Void) {
        let stream = self.stream
        let pending = self.pending
        Task {
            for await _ in stream {
                pending.withLockedValue { $0 = false }
                await body()
            }
        }
    }

    func poke() {
        let first = pending.withLockedValue { pending -> Bool in
            defer { pending = true }
            return !pending
        }
        if first { continuation.yield() }
    }

    func finish() {
        continuation.finish()
    }
}
