import Foundation

/// Two network namespaces joined by a veth, each with a system-type dbus-daemon of its own (its
/// socket in a directory of the test) and an avahi-daemon on that bus (a tmpfs on /run of its own
/// keeps their pid files apart; `host-name=` tells them apart on the link): the local network of
/// two machines, for what Avahi publishes and browses. Needs root, `ip`, dbus-daemon and
/// avahi-daemon (make deps). `stop()` ends every process and removes the namespaces.
public final class AvahiRig: @unchecked Sendable {
    public struct Host: Sendable {
        /// The namespace's name (`ip netns exec NAME …`).
        public let namespace: String
        /// Its address on the link.
        public let address: String
        /// Its avahi-daemon's host name (`NAME.local`).
        public let hostName: String
        /// Its system bus (`DBUS_SYSTEM_BUS_ADDRESS`).
        public let busAddress: String
    }

    public let a: Host
    public let b: Host
    private let directory: TemporaryDirectory
    private var processes: [ChildProcess] = []

    public init() throws {
        directory = try TemporaryDirectory(prefix: "avahi-rig")
        let tag = String(getpid() % 100_000)
        let prefix = "10.77.\(getpid() % 250)."
        a = Host(
            namespace: "dl-a-\(tag)", address: "\(prefix)1", hostName: "dl-a-\(tag)",
            busAddress: "unix:path=\(directory.file("a.sock"))")
        b = Host(
            namespace: "dl-b-\(tag)", address: "\(prefix)2", hostName: "dl-b-\(tag)",
            busAddress: "unix:path=\(directory.file("b.sock"))")
        do {
            try Self.ip(["netns", "add", a.namespace])
            try Self.ip(["netns", "add", b.namespace])
            try Self.ip([
                "link", "add", "veth-a", "netns", a.namespace, "type", "veth", "peer", "name", "veth-b", "netns",
                b.namespace,
            ])
            for (host, link) in [(a, "veth-a"), (b, "veth-b")] {
                try Self.ip(["-n", host.namespace, "addr", "add", "\(host.address)/24", "dev", link])
                try Self.ip(["-n", host.namespace, "link", "set", link, "up"])
                try Self.ip(["-n", host.namespace, "link", "set", "lo", "up"])
                try start(host, link: link)
            }
        } catch {
            stop()
            throw error
        }
    }

    private func start(_ host: Host, link: String) throws {
        let socket = String(host.busAddress.dropFirst("unix:path=".count))
        let busConfig = directory.file("\(host.namespace).bus.conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig><type>system</type><listen>\(host.busAddress)</listen><auth>EXTERNAL</auth>
        <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>
        <allow receive_sender="*"/></policy></busconfig>
        """.write(toFile: busConfig, atomically: true, encoding: .utf8)
        let avahiConfig = directory.file("\(host.namespace).avahi.conf")
        try """
        [server]
        host-name=\(host.hostName)
        use-ipv4=yes
        use-ipv6=no
        allow-interfaces=\(link)
        ratelimit-interval-usec=1000000
        ratelimit-burst=1000
        [publish]
        publish-hinfo=no
        publish-workstation=no
        """.write(toFile: avahiConfig, atomically: true, encoding: .utf8)
        processes.append(
            try ChildProcess([
                "ip", "netns", "exec", host.namespace, "dbus-daemon", "--config-file=\(busConfig)", "--nofork",
                "--nopidfile",
            ]))
        try Self.wait("the bus of \(host.namespace)") { FileManager.default.fileExists(atPath: socket) }
        processes.append(
            try ChildProcess(
                [
                    "ip", "netns", "exec", host.namespace, "sh", "-c",
                    "mount -t tmpfs tmpfs /run && mkdir -p /run/avahi-daemon && exec avahi-daemon -f \(avahiConfig) --no-drop-root --no-chroot --no-rlimits",
                ], environment: ["DBUS_SYSTEM_BUS_ADDRESS": host.busAddress]))
        // Running once it answers on its bus.
        try Self.wait("avahi-daemon in \(host.namespace)") {
            (try? ProcessRunner.runBlocking(
                [
                    "dbus-send", "--bus=\(host.busAddress)", "--print-reply", "--dest=org.freedesktop.Avahi", "/",
                    "org.freedesktop.Avahi.Server.GetState",
                ], timeout: 2
            ).stdout.contains("int32 2")) ?? false
        }
    }

    /// Runs `arguments` in `host`'s namespace with its system bus, and waits for it.
    public func run(
        in host: Host, _ arguments: [String], timeout: TimeInterval = 20
    ) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(
            ["ip", "netns", "exec", host.namespace, "env", "DBUS_SYSTEM_BUS_ADDRESS=\(host.busAddress)"] + arguments,
            timeout: timeout)
    }

    public func stop() {
        for process in processes.reversed() { process.stop(grace: 2) }
        processes = []
        for namespace in [a.namespace, b.namespace] { try? Self.ip(["netns", "del", namespace]) }
        directory.remove()
    }

    private static func ip(_ arguments: [String]) throws {
        let out = try ProcessRunner.runBlocking(["ip"] + arguments, timeout: 10)
        guard out.status == 0 else { throw RigError(message: "ip \(arguments.joined(separator: " ")): \(out.stderr)") }
    }

    private static func wait(_ what: String, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(15)
        while !condition() {
            guard Date() < deadline else { throw RigError(message: "\(what) did not start") }
            usleep(20_000)
        }
    }

    struct RigError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}
