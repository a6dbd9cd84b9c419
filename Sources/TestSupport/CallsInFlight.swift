import Foundation

/// A python3-dbus client that sends many calls to the download manager at once, none waiting for
/// another, and appends each answer to a file as it comes (`ok …` with the reply's values,
/// `error NAME message`), after a line `sent` once every call is on the bus. A test reads the
/// file while the calls are still waiting: which answers came before another call's, and that
/// none was lost.
public struct CallsInFlight: Sendable {
    public let answersFile: String

    /// Creates the (empty, world-writable: the client may run as another user) answers file.
    public init(answersFile: String) throws {
        guard FileManager.default.createFile(atPath: answersFile, contents: nil) else {
            throw POSIXError(.EIO)
        }
        chmod(answersFile, 0o666)
        self.answersFile = answersFile
    }

    /// The client's script. `sends` is python run with `m` (the manager's interface) and the
    /// handlers `ok` and `err` to pass as `reply_handler` and `error_handler`; it sends `count`
    /// calls. The script ends once all are answered (or after two minutes).
    public func script(busAddress: String, count: Int, sends: String) -> String {
        """
        import dbus, dbus.mainloop.glib, time
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.bus.BusConnection('\(busAddress)')
        m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
        answers = []
        def note(text):
            answers.append(text)
            with open('\(answersFile)', 'a') as f: f.write(text + '\\n')
        ok = lambda *values: note(' '.join(['ok'] + [str(v) for v in values]))
        err = lambda e: note('error ' + e.get_dbus_name() + ' ' + str(e))
        \(sends)
        bus.flush()
        note('sent')
        context, deadline = GLib.MainContext.default(), time.time() + 120
        while len(answers) < \(count + 1) and time.time() < deadline:
            context.iteration(True)
        """
    }

    /// The lines written so far.
    public func answers() -> [String] {
        ((try? String(contentsOfFile: answersFile, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}
