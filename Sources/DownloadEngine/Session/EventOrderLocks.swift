#if DEBUG
import Glibc
#endif
import NIOConcurrencyHelpers

/// The locks that order tasks' events (`DownloadTask.inEventOrder`): 256 shared by every task,
/// a task's chosen by its id. One lock each took 64 bytes a task, 6 MiB of a hundred thousand
/// queued tasks that never ran (Benchmarks/RESULTS.md, issue 61's fourth sitting). Sharing is
/// safe because an event order is lock 1 of `SessionManager`'s order: a thread holding one never
/// takes another, so two tasks on one lock only wait for each other's bookkeeping, never for
/// each other. Debug builds (the tests) check that no thread takes one while it holds one.
enum EventOrderLocks {
    private static let locks: [NIOLock] = (0..<256).map { _ in NIOLock() }

    static func withLock<T>(of id: UInt64, _ body: () throws -> T) rethrows -> T {
        #if DEBUG
        precondition(pthread_getspecific(held) == nil, "an event order taken while one is held")
        pthread_setspecific(held, UnsafeRawPointer(bitPattern: 1))
        defer { pthread_setspecific(held, nil) }
        #endif
        return try locks[Int(truncatingIfNeeded: id & 255)].withLock(body)
    }

    #if DEBUG
    /// Set on a thread while it holds an event order.
    private static let held: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
    #endif
}
