import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The progress of one download for a person: percent, bytes, speed and time left, as a bar on
/// a terminal or as a plain line; the speed is averaged over the last few seconds.
struct ProgressLine {
    private var samples: [(time: Double, bytes: Int64)] = []

    /// Bytes per second over the last five seconds of samples; nil until two samples lie more
    /// than 0.2 s apart, so a first look does not show a stalled `0 B/s`.
    mutating func measure(bytes: Int64, at time: Double) -> Double? {
        samples.append((time, bytes))
        samples.removeAll { time - $0.time > 5 }
        guard let first = samples.first, time - first.time > 0.2 else { return nil }
        return Double(max(0, bytes - first.bytes)) / (time - first.time)
    }

    /// `42% [=========>          ] 12 MiB / 29 MiB  3.2 MiB/s  ETA 0:05` in `width` columns.
    static func bar(written: Int64, expected: Int64, speed: Double, width: Int) -> String {
        let speedText = "\(ByteCount.format(Int64(speed)))/s"
        guard expected > 0 else {
            return "\(ByteCount.format(written))  \(speedText)"
        }
        let fraction = min(1, Double(written) / Double(expected))
        let eta = speed > 0 ? ByteCount.duration(Double(expected - written) / speed) : "--:--"
        let percent = "\(Int(fraction * 100))%"
        let text = String(repeating: " ", count: max(0, 4 - percent.count)) + percent
        let tail = " \(ByteCount.format(written)) / \(ByteCount.format(expected))  \(speedText)  ETA \(eta)"
        let barWidth = max(10, min(50, width - text.count - tail.count - 3))
        let filled = Int(fraction * Double(barWidth))
        let bar =
            String(repeating: "=", count: filled) + (filled < barWidth ? ">" : "")
            + String(repeating: " ", count: max(0, barWidth - filled - 1))
        return "\(text) [\(bar)]\(tail)"
    }

    /// A line for logs: `42% 12 MiB of 29 MiB, 3.2 MiB/s` (without the speed when it is nil).
    static func plain(written: Int64, expected: Int64, speed: Double?) -> String {
        let speedText = speed.map { ", \(ByteCount.format(Int64($0)))/s" } ?? ""
        guard expected > 0 else { return "\(ByteCount.format(written))\(speedText)" }
        return
            "\(Int(min(1, Double(written) / Double(expected)) * 100))% \(ByteCount.format(written)) of \(ByteCount.format(expected))\(speedText)"
    }

    /// The time left at `speed`, `""` when it cannot be told (no length, no speed).
    static func eta(written: Int64, expected: Int64, speed: Double?) -> String {
        guard let speed, speed > 0, expected > written else { return "" }
        return ByteCount.duration(Double(expected - written) / speed)
    }
}
