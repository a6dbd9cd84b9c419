import Foundation

/// A private `dbus-daemon` for one test: its own socket, its own service directory (for D-Bus
/// activation tests), and optionally a shipped policy file included in its configuration.
public final class PrivateBus: @unchecked Sendable {
    public let address: String
    public let directory: TemporaryDirectory
    /// Put `NAME.service` files here to make names activatable on this bus.
    public let servicesDirectory: String
    private let process: ChildProcess

    /// - Parameters:
    ///   - type: `session` or `system` (the bus type the daemon announces).
    ///   - limits: `<limit>` values by name, e.g. `["max_message_size": 1048576]`.
    ///   - policy: the `<policy>` elements; by default everyone may own and talk to anything.
    ///   - includes: configuration files to `<include>` (a shipped bus policy).
    public init(
        type: String = "session", limits: [String: Int] = [:], policy: String? = nil, includes: [String] = []
    ) throws {
        directory = try TemporaryDirectory(prefix: "dbus-test")
        servicesDirectory = directory.file("services")
        try FileManager.default.createDirectory(atPath: servicesDirectory, withIntermediateDirectories: true)
        let socket = directory.file("bus")
        let limitLines = limits.sorted { $0.key < $1.key }
            .map { "  <limit name=\"\($0.key)\">\($0.value)</limit>" }.joined(separator: "\n")
        let includeLines = includes.map { "  <include>\($0)</include>" }.joined(separator: "\n")
        let policyText =
            policy ?? """
                  <policy context="default">
                    <allow user="*"/>
                    <allow own="*"/>
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow receive_sender="*"/>
                    <allow eavesdrop="true"/>
                  </policy>
                """
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(type)</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <servicedir>\(servicesDirectory)</servicedir>
            \(policyText)
            \(includeLines)
            \(limitLines)
            </busconfig>
            """
        let configPath = directory.file("bus.conf")
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        // What it starts by activation writes the user's data (Recent) where the test's programs do.
        process = try ChildProcess(
            ["dbus-daemon", "--config-file=\(configPath)", "--nofork", "--nopidfile", "--print-address=1"],
            environment: ["XDG_DATA_HOME": directory.file("data")])
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = process.stdout.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else {
            process.stop()
            throw NSError(
                domain: "PrivateBus", code: 1, userInfo: [NSLocalizedDescriptionKey: "dbus-daemon did not start"])
        }
        address = text
    }

    /// Environment for a client program that should use this bus as its session (and system) bus.
    /// Proxy variables of the machine running the tests are blanked (an empty one counts as
    /// unset): tests reach only their own servers, and set a proxy where they test one. The
    /// user's data directory (`XDG_DATA_HOME`: the recently used files) is the bus's own
    /// (`dataDirectory`), never the account's running the tests.
    public var environment: [String: String] {
        var environment = [
            "DBUS_SESSION_BUS_ADDRESS": address, "DBUS_SYSTEM_BUS_ADDRESS": address, "XDG_DATA_HOME": dataDirectory,
        ]
        for name in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            environment[name] = ""
        }
        return environment
    }

    /// `XDG_DATA_HOME` of the programs on this bus (made by the first that writes there).
    public var dataDirectory: String { directory.file("data") }

    public func stop() {
        process.stop()
        directory.remove()
    }

    deinit { stop() }
}
