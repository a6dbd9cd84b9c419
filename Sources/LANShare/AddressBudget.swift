import NIOConcurrencyHelpers

/// How many requests one address may make of the share server: a bucket of `burst` requests that
/// refills at `perSecond`, per address. Passim allows one request per hash an hour to each client;
/// this server's own peers take a file in ranges like a mirror (several requests for one hash), so
/// it bounds an address's rate instead: a storm from one address is refused (403, as Passim's
/// cooldown is) while the others are served. At most `addresses` are remembered (the oldest
/// forgotten first), so a flood of source addresses cannot grow it.
public final class AddressBudget: Sendable {
    private struct Bucket {
        var tokens: Double
        var at: Double
    }

    private let burst: Double
    private let perSecond: Double
    private let addresses: Int
    private let buckets = NIOLockedValueBox([String: Bucket]())

    public init(burst: Int = 64, perSecond: Double = 16, addresses: Int = 4096) {
        self.burst = Double(burst)
        self.perSecond = perSecond
        self.addresses = addresses
    }

    /// Takes one request of `address` at `now` (seconds, monotonic); false: refused.
    public func take(_ address: String, now: Double) -> Bool {
        buckets.withLockedValue { buckets in
            var bucket = buckets[address] ?? Bucket(tokens: burst, at: now)
            bucket.tokens = min(burst, bucket.tokens + max(0, now - bucket.at) * perSecond)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                buckets[address] = bucket
                return false
            }
            bucket.tokens -= 1
            if buckets[address] == nil, buckets.count >= addresses,
                let oldest = buckets.min(by: { $0.value.at < $1.value.at })?.key
            {
                buckets[oldest] = nil
            }
            buckets[address] = bucket
            return true
        }
    }
}
