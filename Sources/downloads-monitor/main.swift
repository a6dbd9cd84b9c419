import CGio
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

// downloads-monitor [--user | --system | --address ADDRESS]: one line per task event of the
// org.example.Downloads service, through GIO's GDBus (not libdbus).
func fail(_ message: String, status: Int32) -> Never {
    Output.write("downloads-monitor: \(message)\n", to: 2)
    exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var busType = G_BUS_TYPE_SESSION
var address: String?
while let argument = arguments.first {
    arguments.removeFirst()
    switch argument {
    case "--user": busType = G_BUS_TYPE_SESSION
    case "--system": busType = G_BUS_TYPE_SYSTEM
    case "--address":
        guard let value = arguments.first else { fail("--address needs an address", status: 64) }
        address = value
        arguments.removeFirst()
    case "-h", "--help":
        print(
            "usage: downloads-monitor [--user | --system | --address ADDRESS]\nPrints one line per event of your downloads (started, progress, paused, finished, failed)."
        )
        exit(0)
    default:
        fail("unknown argument '\(argument)' (see --help)", status: 64)
    }
}

var error: UnsafeMutablePointer<GError>?
let connection: OpaquePointer?
if let address {
    let flags = GDBusConnectionFlags(
        rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
            | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
    connection = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error)
} else {
    connection = g_bus_get_sync(busType, nil, &error)
}
guard let connection else {
    fail(
        "cannot connect to the bus: \(error.map { String(cString: $0.pointee.message) } ?? "unknown error")", status: 69
    )
}
let monitor = Monitor(connection: connection)
monitor.start()
let loop = g_main_loop_new(nil, 0)
signal(SIGINT, SIG_IGN)
signal(SIGTERM, SIG_IGN)
for number in [SIGINT, SIGTERM] {
    // Keep the source (return true): removing the last one puts back the default action, and a
    // second signal while the loop winds down would then kill the monitor instead of ending it.
    g_unix_signal_add(
        number,
        { data in
            g_main_loop_quit(OpaquePointer(data))
            return 1
        }, UnsafeMutableRawPointer(loop))
}
g_main_loop_run(loop)
