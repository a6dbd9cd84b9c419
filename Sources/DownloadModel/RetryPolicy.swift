/// Exponential backoff with jitter, honouring `Retry-After`, for a bounded number of attempts.
public struct RetryPolicy: Sendable, Hashable {
    public var maxAttempts: Int
    public var baseDelay: Double
    public var maxDelay: Double
    /// Longest `Retry-After` we wait for.
    public var retryAfterCap: Double

    public init(maxAttempts: Int = 5, baseDelay: Double = 1, maxDelay: Double = 60, retryAfterCap: Double = 300) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.retryAfterCap = retryAfterCap
    }

    /// Seconds to wait before attempt `attempt` (1 = the first retry), or nil when out of attempts.
    /// `random` is in 0..<1 (injected so tests are deterministic).
    public func delay(forRetry attempt: Int, retryAfter: Double?, random: Double) -> Double? {
        guard attempt <= maxAttempts else { return nil }
        if let retryAfter { return min(retryAfter, retryAfterCap) }
        let exponential = min(maxDelay, baseDelay * Double(1 << min(attempt - 1, 30)))
        // ±20 % jitter so that many clients do not retry in step.
        return exponential * (0.8 + 0.4 * random)
    }
}
