import CGio
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

/// Follows the service's signals on one GDBusConnection and prints one line per task event:
/// started (with the URL and destination, read through a GDBusProxy), progress at most once a
/// second, paused, finished, failed with the reason; and one per group event (its progress when
/// a file is done or at most once a second, finished, failed). The example a GLib/GTK program copies.
final class Monitor {
    static let busName = "org.example.Downloads"
    static let managerInterface = "org.example.Downloads"
    static let taskInterface = "org.example.Downloads.Task"

    let connection: OpaquePointer
    private var lastProgress: [String: Double] = [:]
    private var lastFilesFinished: [String: UInt32] = [:]
    /// Uploads seen starting: their lines say "upload".
    private var uploads: Set<String> = []

    init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// Subscribes to every signal of the manager interface sent by the service, and watches the
    /// service's name: whenever it appears (started, restarted, activated) the monitor calls
    /// ListTasks once, because on the system bus the service sends a user's signals only to
    /// connections it has seen.
    func start() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        g_dbus_connection_signal_subscribe(
            connection, Self.busName, Self.managerInterface, nil, "/org/example/Downloads", nil,
            G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, member, parameters, data in
                guard let member, let parameters, let data else { return }
                Unmanaged<Monitor>.fromOpaque(data).takeUnretainedValue().handle(String(cString: member), parameters)
            },
            me, nil
        )
        g_bus_watch_name_on_connection(
            connection, Self.busName, G_BUS_NAME_WATCHER_FLAGS_NONE,
            { _, _, _, data in
                guard let data else { return }
                Unmanaged<Monitor>.fromOpaque(data).takeUnretainedValue().serviceAppeared()
            },
            { _, _, data in
                guard let data else { return }
                Unmanaged<Monitor>.fromOpaque(data).takeUnretainedValue().note(
                    "the download service is not running; waiting for it")
            },
            me, nil
        )
    }

    private func serviceAppeared() {
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(
            connection, Self.busName, "/org/example/Downloads", Self.managerInterface, "ListTasks",
            cgio_tuple_string(""), nil, G_DBUS_CALL_FLAGS_NONE, 10_000, nil, &error
        )
        if let reply { g_variant_unref(reply) }
        if let error {
            note("the download service does not answer: \(String(cString: error.pointee.message))")
            g_error_free(error)
            return
        }
        note("watching org.example.Downloads (Ctrl-C ends)")
    }

    /// A status line on standard error.
    func note(_ line: String) {
        Output.write("downloads-monitor: \(line)\n", to: 2)
    }

    private func string(_ tuple: OpaquePointer, _ index: Int) -> String {
        guard let child = g_variant_get_child_value(tuple, gsize(index)) else { return "" }
        defer { g_variant_unref(child) }
        return String(cString: g_variant_get_string(child, nil))
    }

    private func int64(_ tuple: OpaquePointer, _ index: Int) -> Int64 {
        guard let child = g_variant_get_child_value(tuple, gsize(index)) else { return 0 }
        defer { g_variant_unref(child) }
        return Int64(g_variant_get_int64(child))
    }

    private func id(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    func handle(_ member: String, _ parameters: OpaquePointer) {
        let signature = String(cString: g_variant_get_type_string(parameters))
        switch (member, signature) {
        case ("StateChanged", "(os)"):
            let path = string(parameters, 0)
            switch string(parameters, 1) {
            case "running":
                let task = properties(path)
                if task.kind == "upload" {
                    uploads.insert(path)
                    emit("upload \(id(path)) started: \(task.source) -> \(task.url)")
                } else {
                    emit("task \(id(path)) started: \(task.url) -> \(task.destination)")
                }
            case "paused":
                emit("\(noun(path)) \(id(path)) paused")
            case "retrying":
                emit("\(noun(path)) \(id(path)) retrying")
            default:
                break
            }
        case ("Progress", "(oxxx)"):
            let path = string(parameters, 0)
            let now = Double(g_get_monotonic_time()) / 1_000_000
            guard now - (lastProgress[path] ?? 0) >= 1 else { return }
            lastProgress[path] = now
            let written = int64(parameters, 2), expected = int64(parameters, 3)
            let amount =
                expected > 0
                ? "\(Int(Double(written) * 100 / Double(expected)))% (\(written) of \(expected) bytes)"
                : "\(written) bytes"
            emit("\(noun(path)) \(id(path)) progress: \(amount)\(uploads.contains(path) ? " sent" : "")")
        case ("Finished", "(os)"):
            let path = string(parameters, 0)
            lastProgress[path] = nil
            let location = string(parameters, 1)
            if uploads.remove(path) != nil {
                emit("upload \(id(path)) finished" + (location.isEmpty ? "" : ": reply in \(location)"))
            } else {
                emit("task \(id(path)) finished: \(location)")
            }
        case ("Failed", "(ossay)"):
            let path = string(parameters, 0)
            lastProgress[path] = nil
            let name = string(parameters, 1)
            let noun = noun(path)
            uploads.remove(path)
            if name.hasSuffix(".Cancelled") {
                emit("\(noun) \(id(path)) cancelled")
            } else {
                emit("\(noun) \(id(path)) failed: \(string(parameters, 2)) (\(name))")
            }
        case ("GroupProgress", "(oxxuu)"):
            let path = string(parameters, 0)
            let now = Double(g_get_monotonic_time()) / 1_000_000
            let finished = uint32(parameters, 3), files = uint32(parameters, 4)
            // At most once a second, and always when a file is done.
            let done = finished != lastFilesFinished[path]
            guard done || now - (lastProgress[path] ?? 0) >= 1 else { return }
            lastProgress[path] = now
            lastFilesFinished[path] = finished
            let written = int64(parameters, 1), expected = int64(parameters, 2)
            let bytes = expected >= 0 ? "\(written) of \(expected) bytes" : "\(written) bytes"
            emit("group \(id(path)) progress: \(finished) of \(files) files, \(bytes)")
        case ("GroupFinished", "(o)"):
            let path = string(parameters, 0)
            lastProgress[path] = nil
            lastFilesFinished[path] = nil
            emit("group \(id(path)) finished")
        case ("GroupFailed", "(oss)"):
            let path = string(parameters, 0)
            lastProgress[path] = nil
            lastFilesFinished[path] = nil
            emit("group \(id(path)) failed: \(string(parameters, 2)) (\(string(parameters, 1)))")
        default:
            break
        }
    }

    private func uint32(_ tuple: OpaquePointer, _ index: Int) -> UInt32 {
        guard let child = g_variant_get_child_value(tuple, gsize(index)) else { return 0 }
        defer { g_variant_unref(child) }
        return UInt32(g_variant_get_uint32(child))
    }

    /// URL and Destination of a task, through a GDBusProxy (which loads every property at once).
    /// "upload" for an upload seen starting, else "task".
    private func noun(_ path: String) -> String { uploads.contains(path) ? "upload" : "task" }

    private func properties(_ path: String) -> (url: String, destination: String, kind: String, source: String) {
        var error: UnsafeMutablePointer<GError>?
        guard
            let proxy = g_dbus_proxy_new_sync(
                connection, G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS, nil, Self.busName, path, Self.taskInterface, nil,
                &error
            )
        else {
            if let error { g_error_free(error) }
            return ("?", "?", "?", "?")
        }
        defer { g_object_unref(proxy) }
        func property(_ name: String) -> String {
            guard let value = g_dbus_proxy_get_cached_property(proxy, name) else { return "?" }
            defer { g_variant_unref(value) }
            return String(cString: g_variant_get_string(value, nil))
        }
        return (property("URL"), property("Destination"), property("Kind"), property("Source"))
    }

    /// Every line, whole: URLs, names and messages come from callers and servers, and a
    /// terminal obeys the control sequences they may carry.
    private func emit(_ line: String) {
        Output.write(DisplayText.escaped(line) + "\n", to: 1)
    }
}
