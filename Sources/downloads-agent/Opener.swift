import FoundationEssentials
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

    /// Starts the app of a desktop entry (`org.example.App.desktop`) as the desktop does (`gio
    /// launch` with its file, found under `$XDG_DATA_HOME` and `$XDG_DATA_DIRS`), without waiting.
    static func launch(desktopEntry: String) {
        guard !desktopEntry.isEmpty, !desktopEntry.contains("/") else { return }
        let environment = ProcessInfo.processInfo.environment
        let home = environment["XDG_DATA_HOME"] ?? ((environment["HOME"] ?? "") + "/.local/share")
        let directories =
            [home]
            + (environment["XDG_DATA_DIRS"] ?? "/usr/local/share:/usr/share").split(separator: ":").map(String.init)
        guard
            let file = directories.map({ $0 + "/applications/" + desktopEntry }).first(where: {
                access($0, R_OK) == 0
            })
        else { return }
        var pid = pid_t()
        let arguments = ["gio", "launch", file]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        _ = posix_spawnp(&pid, "gio", nil, nil, &argv, environ)
    }
}
