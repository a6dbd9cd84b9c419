import Foundation

/// A network namespace of the test's own whose loopback is a bottleneck: MTU 1500 (tbf drops
/// loopback's 64 KiB packets) and `tbf` at `rate` with a 100 ms queue; every loopback packet
/// leaves through it. A server (python3's threading `http.server`) serves `www` inside; the
/// daemon runs inside with `prefix` as its launcher; the bus is a socket path, reachable from
/// any namespace. `init` throws `Unavailable` where namespaces or tbf cannot be made.
public final class Bottleneck: @unchecked Sendable {
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    public let name: String
    public let www: TemporaryDirectory
    public let port: Int
    private var server: ChildProcess?

    public var prefix: [String] { ["ip", "netns", "exec", name] }

    public init(rate: String = "80mbit") throws {
        name = "dltest\(getpid())\(Int.random(in: 0..<1_000_000))"
        for command in [
            ["ip", "netns", "add", name],
            ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "mtu", "1500", "up"],
            [
                "ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst",
                "32kb", "latency", "100ms",
            ],
        ] {
            let out = try ProcessRunner.runBlocking(command, timeout: 20)
            guard out.status == 0 else {
                _ = try? ProcessRunner.runBlocking(["ip", "netns", "del", name], timeout: 20)
                throw Unavailable(
                    description:
                        "\(command.joined(separator: " ")): \(out.stderr.trimmingCharacters(in: .whitespacesAndNewlines))"
                )
            }
        }
        www = try TemporaryDirectory(prefix: "bottleneck-www")
        port = try FreePort.pick()
        server = try ChildProcess(
            prefix + [
                "/usr/bin/python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", www.path,
            ])
        let deadline = Date().addingTimeInterval(20)
        while (try? ProcessRunner.runBlocking(
            prefix + ["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:\(port)/"], timeout: 5))?.status != 0
        {
            guard Date() < deadline else {
                stop()
                throw Unavailable(description: "the server in the namespace did not answer")
            }
            usleep(50_000)
        }
    }

    /// `http://127.0.0.1:PORT/NAME` inside the namespace.
    public func url(_ name: String) -> String { "http://127.0.0.1:\(port)/\(name)" }

    /// Writes `content` as `www/NAME`.
    public func file(_ name: String, _ content: [UInt8]) throws {
        try Data(content).write(to: URL(fileURLWithPath: www.path + "/" + name))
    }

    /// A curl inside the namespace downloading `name` for at most `seconds` (the competing flow).
    public func curl(_ name: String, seconds: Int) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(
            prefix + ["curl", "-s", "-o", "/dev/null", "--max-time", String(seconds), url(name)],
            timeout: TimeInterval(seconds + 20))
    }

    public func stop() {
        server?.stop()
        server = nil
        www.remove()
        _ = try? ProcessRunner.runBlocking(["ip", "netns", "del", name], timeout: 20)
    }
}
