import Foundation
import GRDB

/// A date in the form the store keeps dates: GRDB's text ("yyyy-MM-dd HH:mm:ss.SSS", UTC, to the
/// nearest millisecond), written with `gmtime_r` instead of GRDB's one shared `DateFormatter`
/// (ICU behind a lock, taken by every save: 3 % of the daemon's CPU in the many-small-files
/// benchmark, Benchmarks/RESULTS.md). Reading is GRDB's; `DownloadStoreTests` checks both forms
/// agree.
enum StoredTime {
    static func text(_ date: Date) -> DatabaseValue {
        // Half a millisecond goes up (towards the later time), as ICU rounds before 1970 too.
        let milliseconds = (date.timeIntervalSince1970 * 1000 + 0.5).rounded(.down)
        guard milliseconds.isFinite, abs(milliseconds) < 1e15 else { return date.databaseValue }
        let total = Int64(milliseconds)
        var seconds = time_t(total >= 0 ? total / 1000 : (total - 999) / 1000)
        let millisecond = Int(total - Int64(seconds) * 1000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return date.databaseValue }
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else { return date.databaseValue }
        var text = [UInt8]()
        text.reserveCapacity(23)
        func put(_ value: Int, _ digits: Int) {
            var divisor = 1
            for _ in 1..<digits { divisor *= 10 }
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        put(year, 4); text.append(UInt8(ascii: "-"))
        put(Int(parts.tm_mon) + 1, 2); text.append(UInt8(ascii: "-"))
        put(Int(parts.tm_mday), 2); text.append(UInt8(ascii: " "))
        put(Int(parts.tm_hour), 2); text.append(UInt8(ascii: ":"))
        put(Int(parts.tm_min), 2); text.append(UInt8(ascii: ":"))
        put(Int(parts.tm_sec), 2); text.append(UInt8(ascii: "."))
        put(millisecond, 3)
        return String(decoding: text, as: UTF8.self).databaseValue
    }

    /// Now, as `text` writes it.
    static var now: DatabaseValue { text(Date()) }
}
