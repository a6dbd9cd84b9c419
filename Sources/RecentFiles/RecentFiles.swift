import CGio
#if canImport(Glibc)
import Glibc
#endif

/// The user's recently used files, the freedesktop "Desktop Bookmark" file
/// (`$XDG_DATA_HOME/recently-used.xbel`) that GTK's file chooser, Nautilus and the shell's
/// search read as "Recent", written through GLib's own `GBookmarkFile` as `GtkRecentManager`
/// writes it (read, the item added or touched, written whole by `g_file_set_contents`'s
/// rename), so nothing another app put there is lost or reformatted by us. Synchronous file
/// I/O: callers run it off any event loop, one add at a time.
public struct RecentFiles: Sendable {
    /// The bookmark file.
    public let path: String

    /// The user's own: `g_get_user_data_dir()` (`$XDG_DATA_HOME`, or `~/.local/share`).
    public init() {
        path = String(cString: g_get_user_data_dir()) + "/recently-used.xbel"
    }

    public init(path: String) {
        self.path = path
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Adds `file` (an absolute path), or touches it when it is listed: its MIME type guessed
    /// from its name and first bytes, the application named by `desktopEntry` (its id without
    /// `.desktop`, started as `'ID' %u` as GTK writes it) or, without one, `fallbackName`
    /// opening it with `xdg-open`.
    public func add(_ file: String, desktopEntry: String?, fallbackName: String) throws {
        var error: UnsafeMutablePointer<GError>?
        guard let uriPointer = g_filename_to_uri(file, nil, &error) else {
            throw Self.failure(error, "\(file) has no file URI")
        }
        defer { g_free(uriPointer) }
        let bookmarks = g_bookmark_file_new()
        defer { g_bookmark_file_free(bookmarks) }
        if !boolean(g_bookmark_file_load_from_file(bookmarks, path, &error)) {
            // None yet is the only reason to go on: a file we cannot read is never overwritten.
            let missing =
                error.map {
                    $0.pointee.domain == g_file_error_quark() && $0.pointee.code == G_FILE_ERROR_NOENT.rawValue
                }
                ?? false
            if !missing { throw Self.failure(error, "\(path) cannot be read") }
            g_clear_error(&error)
        }
        let mime = Self.mimeType(of: file)
        g_bookmark_file_set_mime_type(bookmarks, uriPointer, mime)
        let application: (name: String, exec: String) =
            if let desktopEntry, desktopEntry.hasSuffix(".desktop") {
                (String(desktopEntry.dropLast(".desktop".count)), "'\(desktopEntry.dropLast(".desktop".count))' %u")
            } else {
                (fallbackName, "xdg-open %u")
            }
        // Registers the application on the item (or counts one more use of it) and sets its
        // modified and visited times, as GtkRecentManager's add does.
        g_bookmark_file_add_application(bookmarks, uriPointer, application.name, application.exec)
        // A new account has no ~/.local/share yet: made as GTK's recent manager makes it.
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            g_mkdir_with_parents(String(path[..<slash]), 0o700)
        }
        guard boolean(g_bookmark_file_to_file(bookmarks, path, &error)) else {
            throw Self.failure(error, "\(path) cannot be written")
        }
    }

    /// GIO's guess from the name and the first 4 KiB (`g_content_type_guess`), as a MIME type.
    static func mimeType(of file: String) -> String {
        var head = [UInt8](repeating: 0, count: 4096)
        var length = 0
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        if fd >= 0 {
            length = max(0, read(fd, &head, head.count))
            close(fd)
        }
        var uncertain: gboolean = 0
        guard
            let type = head.withUnsafeBufferPointer({
                g_content_type_guess(file, $0.baseAddress, gsize(length), &uncertain)
            })
        else { return "application/octet-stream" }
        defer { g_free(type) }
        guard let mime = g_content_type_get_mime_type(type) else { return "application/octet-stream" }
        defer { g_free(mime) }
        return String(cString: mime)
    }

    private func boolean(_ value: gboolean) -> Bool { value != 0 }

    private static func failure(_ error: UnsafeMutablePointer<GError>?, _ what: String) -> Failure {
        defer { if let error { g_error_free(error) } }
        let reason = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
        return Failure(description: "\(what): \(reason)")
    }
}
