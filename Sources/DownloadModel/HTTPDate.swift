import Foundation

/// HTTP's dates (RFC 9110 §5.6.7) as Unix seconds: the IMF-fixdate every server sends and apt's
/// methods exchange (`Last-Modified`), made without a formatter; the two obsolete forms still
/// read, as a recipient must.
public enum HTTPDate {
    private static let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` for `seconds` (from 1970 to 9999).
    public static func text(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let weekday = days[Int(((seconds / 86_400) % 7 + 7) % 7)]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var year = String(parts.tm_year + 1900)
        while year.count < 4 { year = "0" + year }
        return
            "\(weekday), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(year) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// Unix seconds of an HTTP-date in any of its three forms; nil for anything else. The
    /// IMF-fixdate is read by hand (a response head of each range of a download has one).
    public static func seconds(_ text: String) -> Int64? {
        fixdate(Array(text.utf8)) ?? date(text).map { Int64($0.timeIntervalSince1970.rounded(.down)) }
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`, exactly.
    private static func fixdate(_ b: [UInt8]) -> Int64? {
        guard b.count == 29, b[3] == UInt8(ascii: ","), b[4] == 32, b[7] == 32, b[11] == 32, b[16] == 32,
            b[19] == UInt8(ascii: ":"), b[22] == UInt8(ascii: ":"), b[25] == 32,
            String(decoding: b[26...], as: UTF8.self) == "GMT"
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard (48...57).contains(b[index]) else { return nil }
                value = value * 10 + Int(b[index] - 48)
            }
            return value
        }
        guard let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
            let minute = number(20..<22), let second = number(23..<25),
            let month = months.firstIndex(of: String(decoding: b[8..<11], as: UTF8.self)),
            (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Int64(timegm(&parts))
    }

    public static func date(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
