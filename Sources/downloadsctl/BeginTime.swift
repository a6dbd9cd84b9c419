#if canImport(Glibc)
import Glibc
#endif

/// `--begin-at`: a local time of day (`02:00`, `2:30:15`: the next such moment, today or
/// tomorrow, as at(1) reads it), a date (`2026-12-24`: its midnight, local), or an ISO 8601 date
/// and time (`2026-12-24T02:00`, with `Z` or `+01:00` for a zone other than the local one).
enum BeginTime {
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// Unix seconds for `text`, with `now` as the reference for a time of day.
    static func parse(_ text: String, now: Int = Int(time(nil))) throws -> UInt64 {
        let invalid = Invalid(
            description: "--begin-at '\(text)' is not a time (HH:MM), a date (YYYY-MM-DD) or an ISO 8601 date and time")
        let trimmed = text.trimmingSpaces
        // A time of day.
        if let clock = parseClock(Substring(trimmed)) {
            var moment = time_t(now)
            var parts = tm()
            localtime_r(&moment, &parts)
            parts.tm_hour = Int32(clock.hour)
            parts.tm_min = Int32(clock.minute)
            parts.tm_sec = Int32(clock.second)
            parts.tm_isdst = -1
            var result = Int(mktime(&parts))
            if result <= now {
                parts.tm_mday += 1
                parts.tm_isdst = -1
                result = Int(mktime(&parts))
            }
            guard result > 0 else { throw invalid }
            return UInt64(result)
        }
        // A date, with an optional time and zone.
        let separators: Set<Character> = ["T", "t", " "]
        let datePart: Substring
        var rest: Substring = ""
        if let split = trimmed.firstIndex(where: { separators.contains($0) }) {
            datePart = trimmed[..<split]
            rest = trimmed[trimmed.index(after: split)...]
        } else {
            datePart = Substring(trimmed)
        }
        let fields = datePart.split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0].count == 4, fields[1].count == 2, fields[2].count == 2,
            let year = Int(fields[0]), let month = Int(fields[1]), let day = Int(fields[2]),
            (1...12).contains(month), (1...31).contains(day)
        else { throw invalid }
        var offset: Int?
        if rest.hasSuffix("Z") || rest.hasSuffix("z") {
            offset = 0
            rest = rest.dropLast()
        } else if let sign = rest.lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = rest[rest.index(after: sign)...].split(separator: ":")
            guard zone.count <= 2, let hours = zone.first.flatMap({ Int($0) }), hours <= 14 else { throw invalid }
            let minutes = zone.count == 2 ? Int(zone[1]) ?? 99 : 0
            guard minutes < 60 else { throw invalid }
            offset = (hours * 3600 + minutes * 60) * (rest[sign] == "-" ? -1 : 1)
            rest = rest[..<sign]
        }
        let clock = rest.isEmpty ? (hour: 0, minute: 0, second: 0) : parseClock(rest)
        guard let clock else { throw invalid }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(clock.hour)
        parts.tm_min = Int32(clock.minute)
        parts.tm_sec = Int32(clock.second)
        parts.tm_isdst = -1
        let seconds: Int
        if let offset {
            seconds = Int(timegm(&parts)) - offset
        } else {
            seconds = Int(mktime(&parts))
        }
        guard seconds > 0 else { throw invalid }
        return UInt64(seconds)
    }

    /// `HH:MM` or `HH:MM:SS`.
    private static func parseClock(_ text: Substring) -> (hour: Int, minute: Int, second: Int)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count),
            parts.allSatisfy({ (1...2).contains($0.count) && $0.allSatisfy(\.isASCII) }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), hour < 24, minute < 60
        else { return nil }
        let second = parts.count == 3 ? Int(parts[2]) : 0
        guard let second, second < 60 else { return nil }
        return (hour, minute, second)
    }
}

private extension String {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
