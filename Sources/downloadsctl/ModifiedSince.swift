import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `-z`, `--if-modified-since` (curl's `-z`): a file, whose modification time it is, or a date
/// as `--begin-at` takes one (`2026-12-24`, `2026-12-24T02:00Z`). A file that is not there asks
/// no condition, as curl's `-z` does: the first `get -z page.html -o page.html` fetches the file
/// the later ones fetch only when it changed.
enum ModifiedSince {
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// Unix seconds, or nil when `argument` names a file that is not there.
    static func seconds(_ argument: String) throws -> Int64? {
        var info = stat()
        if stat(argument, &info) == 0 { return Int64(info.st_mtim.tv_sec) }
        guard looksLikeADate(argument) else { return nil }
        do {
            return Int64(try BeginTime.parse(argument))
        } catch {
            throw Invalid(
                description:
                    "--if-modified-since '\(argument)' is neither a file nor a date (YYYY-MM-DD, or an ISO 8601 date and time)"
            )
        }
    }

    /// `YYYY-` at its start: a date, not a file's name (a time of day alone is not a date here:
    /// `--begin-at` reads it as the next such moment, which is no time a file changed since).
    static func looksLikeADate(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let isDigit = { (byte: UInt8) in byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        return bytes.count >= 10 && bytes[0..<4].allSatisfy(isDigit) && bytes[4] == UInt8(ascii: "-")
    }
}
