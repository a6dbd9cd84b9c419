import DownloadModel
/// The rate of a background transfer, from the queuing delay the path shows: LEDBAT's rule
/// (RFC 6817: keep the delay you add near a target, give way as it grows) applied by the
/// receiver, as rLEDBAT does (RFC 9840): the engine reads no faster than this rate, the TCP
/// receive window closes, and the sender slows down. Pure: delays and throughput in, a rate out.
///
/// - Base delay: the smallest delay seen in the last minute (six 10-second buckets, so a route
///   that changes is learnt again within a minute); the current delay: the smallest of the
///   last three probes.
/// - Each step the rate is multiplied by `1 + gain × off`, `off` = (target − queuing) / target
///   bounded to ±1: up to 50 % more while the path is empty, a little less when the transfer's
///   own queue passes the target, down to half when another flow keeps the queue full. A flow
///   that fills the queue beyond the target keeps it there whatever this transfer does, so the
///   rate goes on falling to `floor`: the background transfer gives way. Alone, the transfer
///   keeps about `target` in the queue and the link busy.
/// - A decrease starts from what actually flowed (a rate far above the link means nothing);
///   an increase stops at twice what flowed.
/// `yielding`: the rate is held under half the best throughput of the last 30 seconds.
struct BackgroundPacer: Sendable {
    /// The queuing delay a background transfer aims at, in seconds (LEDBAT allows 100 ms; this
    /// keeps a call or a game unharmed; measured against the bench: see Benchmarks/RESULTS.md).
    static let target = 0.015
    static let gain = 0.5
    /// Never slower than this (bytes a second): a background transfer still makes progress.
    static let floor = 32.0 * 1024

    private(set) var rate = 256.0 * 1024
    private(set) var yielding = false
    private var delays: [(start: Double, value: Double)] = []
    private var peaks: [(start: Double, value: Double)] = []

    /// One step: `delay` the path's delay now (seconds; a probe that failed counts as a large
    /// one), `throughput` what the transfer received over the last step (bytes a second).
    /// Returns the rate (bytes a second) until the next step.
    mutating func observe(delay: Double, throughput: Double, now: Double) -> UInt64 {
        Self.keep(&delays, delay, now: now, span: 10, count: 6, min)
        Self.keep(&peaks, throughput, now: now, span: 5, count: 6, max)
        let base = delays.map(\.1).min() ?? delay
        let queuing = max(0, delay - base)
        if queuing > Self.target {
            // From the rate (no more than twice what flowed), a tenth to a half less as the
            // queue passes the target by a little or by the target again.
            let over = min(1, max(0.2, (queuing - Self.target) / Self.target))
            rate = max(Self.floor, min(rate, 2 * max(throughput, Self.floor)) * (1 - Self.gain * over))
        } else {
            let room = (Self.target - queuing) / Self.target
            rate = min(rate * (1 + 0.8 * room), max(2 * throughput, 4 * Self.floor, rate))
        }
        yielding = rate < 0.5 * (peaks.map(\.1).max() ?? 0)
        return UInt64(rate)
    }

    /// The running minimum (or maximum) of `value` in buckets of `span` seconds, `count` kept.
    private static func keep(
        _ buckets: inout [(start: Double, value: Double)], _ value: Double, now: Double, span: Double, count: Int,
        _ pick: (Double, Double) -> Double
    ) {
        if let last = buckets.last, now - last.start < span {
            buckets[buckets.count - 1].value = pick(last.value, value)
        } else {
            buckets.append((now, value))
            if buckets.count > count { buckets.removeFirst() }
        }
    }
}
