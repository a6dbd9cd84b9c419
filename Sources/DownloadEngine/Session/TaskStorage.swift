import Glibc

/// A task's one allocation: its id and state as the buffer's header and the lock that guards
/// the state as its one element, as NIO's `NIOLockedValueBox` lays out a value and its lock
/// (`DownloadTask` is the reference to it; the state is `DownloadTask.State`).
final class TaskStorage: ManagedBuffer<TaskStorage.Cell, pthread_mutex_t> {
    /// The header: the id (never changed) and the state (only under the lock).
    struct Cell {
        let id: UInt64
        var state: DownloadTask.State
    }

    private static let idOffset = MemoryLayout<Cell>.offset(of: \Cell.id) ?? 0

    static func make(id: UInt64, state: DownloadTask.State) -> TaskStorage {
        let storage = unsafeDowncast(
            create(minimumCapacity: 1) { _ in Cell(id: id, state: state) }, to: TaskStorage.self)
        storage.withUnsafeMutablePointerToElements { lock in
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            #if DEBUG
            // As NIO's locks are in debug builds: a lock taken twice by one thread fails
            // rather than hangs.
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
            #endif
            let made = pthread_mutex_init(lock, &attributes)
            pthread_mutexattr_destroy(&attributes)
            precondition(made == 0, "pthread_mutex_init failed: \(made)")
        }
        return storage
    }

    /// Read without the lock (through its place in the header): it never changes, and nothing
    /// else of the header is touched.
    var id: UInt64 {
        withUnsafeMutablePointerToHeader { UnsafeRawPointer($0).load(fromByteOffset: Self.idOffset, as: UInt64.self) }
    }

    func withLockedState<T>(_ body: (inout DownloadTask.State) throws -> T) rethrows -> T {
        try withUnsafeMutablePointers { cell, lock in
            let locked = pthread_mutex_lock(lock)
            precondition(locked == 0, "pthread_mutex_lock failed: \(locked)")
            defer {
                let unlocked = pthread_mutex_unlock(lock)
                precondition(unlocked == 0, "pthread_mutex_unlock failed: \(unlocked)")
            }
            return try body(&cell.pointee.state)
        }
    }

    deinit {
        withUnsafeMutablePointerToElements { lock in
            let destroyed = pthread_mutex_destroy(lock)
            assert(destroyed == 0, "pthread_mutex_destroy failed: \(destroyed)")
        }
    }
}
