import Foundation
import TestSupport
import XCTest

/// `downloadsd --system` on a private system-type bus whose configuration includes the shipped
/// policy (dbus/org.example.Downloads.conf), with a second user (nobody) as a client.
class SystemBusTestCase: DaemonTestCase {
    override var busArguments: [String] { ["--system"] }

    override func makeBus() throws -> PrivateBus { try Self.makeSystemBus() }

    /// A private system-type bus with Debian's default policy, the shipped policy and the
    /// desktop services' names for python-dbusmock.
    static func makeSystemBus() throws -> PrivateBus {
        // The default policy of a system bus (as Debian's system.conf): nobody owns names or sends
        // method calls unless a service's policy file allows it.
        let bus = try PrivateBus(
            type: "system",
            policy: """
                  <policy context="default">
                    <allow user="*"/>
                    <deny own="*"/>
                    <deny send_type="method_call"/>
                    <allow send_type="signal"/>
                    <allow send_requested_reply="true" send_type="method_return"/>
                    <allow send_requested_reply="true" send_type="error"/>
                    <allow receive_type="method_call"/>
                    <allow receive_type="method_return"/>
                    <allow receive_type="error"/>
                    <allow receive_type="signal"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                  </policy>
                  <!-- Test only: root runs python-dbusmock stand-ins of the desktop's system services. -->
                  <policy user="root">
                    <allow own="org.freedesktop.PolicyKit1"/>
                    <allow own="org.freedesktop.login1"/>
                    <allow own="org.freedesktop.NetworkManager"/>
                    <allow own="org.freedesktop.UPower"/>
                    <allow own="net.hadess.PowerProfiles"/>
                  </policy>
                  <policy context="default">
                    <allow send_destination="org.freedesktop.PolicyKit1"/>
                    <allow send_destination="org.freedesktop.login1"/>
                    <allow send_destination="org.freedesktop.NetworkManager"/>
                    <allow send_destination="org.freedesktop.UPower"/>
                    <allow send_destination="net.hadess.PowerProfiles"/>
                  </policy>
                """,
            includes: [DaemonTestCase.packageRoot.appendingPathComponent("dbus/org.example.Downloads.conf").path])
        // Let another user reach the socket.
        chmod(bus.directory.path, 0o755)
        return bus
    }

    /// Runs python3-dbus as `uid` (with `gid`; `setprivGroups` as setpriv takes them:
    /// `--init-groups` for a user of the user database, `--clear-groups` for nobody) with `umask`,
    /// with helpers `m` (the manager), `prop`, `wait`, `wait_bytes`, `err`, `start`, `call` (a
    /// task method) and `out` (printed as JSON at the end, and returned).
    func python(
        uid: UInt32, gid: UInt32, setprivGroups: String, umask: Int = 0o022, _ body: String
    ) async throws -> [String: Any] {
        let script = """
            import dbus, json, os, time
            os.umask(\(umask))
            bus = dbus.bus.BusConnection('\(bus.address)')
            m = dbus.Interface(bus.get_object('org.example.Downloads', '/org/example/Downloads'), 'org.example.Downloads')
            def prop(path, name):
                return bus.get_object('org.example.Downloads', path).Get(
                    'org.example.Downloads.Task', name, dbus_interface='org.freedesktop.DBus.Properties')
            def wait(path, states, seconds=30):
                deadline = time.time() + seconds
                while time.time() < deadline:
                    state = str(prop(path, 'State'))
                    if state in states: return state
                    time.sleep(0.05)
                return 'timeout:' + str(prop(path, 'State'))
            def wait_bytes(path, n, seconds=30):
                deadline = time.time() + seconds
                while time.time() < deadline and int(prop(path, 'BytesWritten')) < n: time.sleep(0.02)
            def err(f):
                try:
                    r = f()
                    return 'ok:' + str(r)
                except dbus.DBusException as e:
                    return e.get_dbus_name() + ': ' + e.get_dbus_message()
            def start(url, dest, **options):
                return str(m.Start(url, dest, dbus.Dictionary(options, signature='sv')))
            def call(path, method):
                return bus.get_object('org.example.Downloads', path).get_dbus_method(method, 'org.example.Downloads.Task')()
            out = {}
            \(body)
            print(json.dumps(out))
            """
        let output = try await run([
            "setpriv", "--reuid=\(uid)", "--regid=\(gid)", setprivGroups, "--reset-env", "/usr/bin/python3", "-c",
            script,
        ])
        XCTAssertEqual(output.status, 0, output.description)
        guard let last = output.stdout.split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        else {
            XCTFail(
                "no JSON from the client: \(output.description)\n\((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "")"
            )
            return [:]
        }
        return object
    }

    /// Runs python3-dbus as user nobody against the system bus.
    func asNobody(_ script: String) async throws -> ProcessRunner.Output {
        try await run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script])
    }

    /// Starts a python-dbusmock template (`polkitd`, `logind`, `networkmanager`, `upower`,
    /// `power_profiles_daemon`) on this bus as
    /// root and waits until it owns its name. Stopped at the end of the test.
    func startMock(_ template: String, name: String) async throws -> ChildProcess {
        let mock = try ChildProcess(
            [
                "/usr/bin/python3", "-m", "dbusmock", "--system", "--template", template, "-l",
                directory.file("\(template).log"),
            ],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        )
        addTeardownBlock { mock.stop() }
        for _ in 0..<250 {
            let owner = try await run(["busctl", "--address=\(bus.address)", "status", name])
            if owner.status == 0 { return mock }
            try await Task.sleep(for: .milliseconds(40))
        }
        XCTFail("the \(template) mock did not take \(name)")
        return mock
    }
}
