#if canImport(Glibc)
import DownloadModel
import Glibc
#endif

/// The text of an errno value.
func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
