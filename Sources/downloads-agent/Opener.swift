#if canImport(Glibc)
import Glibc
#endif

/// Opens a file the way the desktop does (`xdg-open`, found on PATH), without waiting for it.
enum Opener {
    static func open(_ path: String) {
        var pid = pid_t()
        let arguments = ["xdg-open", path]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        _ = posix_spawnp(&pid, "xdg-open", nil, nil, &argv, environ)
    }
}
