#if canImport(Glibc)
import DownloadModel
import Glibc
#endif

/// The time of day, in Unix seconds: what `earliest_begin` is compared with (a wall-clock time a
/// person chose, so it follows the clock when it is set and across suspend).
enum WallClock {
    static var now: UInt64 { UInt64(max(0, time(nil))) }
}
