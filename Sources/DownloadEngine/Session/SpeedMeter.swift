import Dispatch

/// A task's speed (`Speed`): bytes a second over the last few seconds, from the counters each
/// progress delivery sees (at most ten a second), 0 once nothing moved for that long.
struct SpeedMeter: Sendable {
    /// How far back the speed looks.
    static let window: UInt64 = 3_000_000_000
    private var samples: [(at: UInt64, bytes: Int64)] = []

    /// The counter at `now` (nanoseconds of uptime): kept, and those older than the window dropped.
    mutating func record(_ bytes: Int64, at now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        if let last = samples.last, bytes < last.bytes { samples.removeAll() }  // a restart from zero
        samples.append((now, bytes))
        let oldest = now > Self.window ? now - Self.window : 0
        // One sample older than the window stays, so the window is covered end to end.
        while samples.count > 2, samples[1].at <= oldest { samples.removeFirst() }
    }

    /// Bytes a second at `now`; 0 with fewer than two samples or none within the window.
    func speed(at now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> UInt64 {
        guard let first = samples.first, let last = samples.last, last.at > first.at,
            now < last.at + Self.window, last.bytes > first.bytes
        else { return 0 }
        return UInt64(Double(last.bytes - first.bytes) / (Double(last.at - first.at) / 1e9))
    }
}
