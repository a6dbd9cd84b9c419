import Dispatch

extension DispatchQueue {
    /// `body`'s result or error, run on this queue (a task's I/O queue: in order with its other
    /// file calls, off the cooperative pool).
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            self.async { continuation.resume(with: Result { try body() }) }
        }
    }
}
