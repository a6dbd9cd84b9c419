import DBus
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// `downloadsd` as a subprocess on a private bus, with a local HTTP server and a state directory.
class DaemonTestCase: XCTestCase {
    var bus: PrivateBus!
    var http: TestHTTPServer!
    var directory: TemporaryDirectory!
    var daemon: ChildProcess?
    var client: Connection!
    var extraArguments: [String] { [] }
    /// A command the daemon's command line is handed to (it must exec it, so the pid stays the daemon's).
    var launcher: [String] { [] }
    /// How the daemon finds its bus (subclasses may use `--system` with DBUS_SYSTEM_BUS_ADDRESS).
    var busArguments: [String] { ["--address", bus.address] }
    func makeBus() throws -> PrivateBus { try PrivateBus() }
    let signals = NIOLockedValueBox([(String, [DBusValue])]())

    /// The directory holding Package.swift (for the built daemon and the shipped files in dbus/).
    static let packageRoot = PackageRoot.url

    static let binary = PackageRoot.debugBinary("downloadsd")

    var stateDirectory: String { directory.file("state") }

    override func setUp() async throws {
        bus = try makeBus()
        http = try TestHTTPServer()
        directory = try TemporaryDirectory(prefix: "daemon-test")
        try await startDaemon()
        client = try await Connection.open(.address(bus.address))
        try await client.subscribe(MatchRule(interface: "org.example.Downloads")) { [signals] message in
            let arguments = (try? message.arguments()) ?? []
            signals.withLockedValue { $0.append((message.member ?? "", arguments)) }
        }
    }

    override func tearDown() async throws {
        // A failed test shows the end of the daemon's log (the directory holding it goes next).
        if (testRun?.totalFailureCount ?? 0) > 0, !daemonLog.isEmpty,
            let log = try? String(contentsOfFile: daemonLog, encoding: .utf8)
        {
            print("DAEMON LOG (last 80 lines) of \(name):")
            print(log.split(separator: "\n", omittingEmptySubsequences: false).suffix(80).joined(separator: "\n"))
        }
        client?.close()
        daemon?.stop()
        stopActivatedDaemons()
        http?.stop()
        bus?.stop()
        directory?.remove()
    }

    var daemonLog = ""
    /// Set for the daemon's next start, beside the bus's (a crash point, for one).
    var daemonEnvironment: [String: String] = [:]

    /// Starts the daemon without waiting for it to take its name.
    func launchDaemon() throws {
        let log = directory.file("daemon-\(Int(Date().timeIntervalSince1970 * 1000)).log")
        daemonLog = log
        daemon = try ChildProcess(
            launcher + [
                "/bin/sh", "-c", "exec \"$0\" \"$@\" 2>>\(log)", DaemonTestCase.binary, "--state-dir", stateDirectory,
            ] + busArguments + ["--exit-idle-time", "0"] + extraArguments,
            environment: bus.environment.merging(daemonEnvironment) { $1 })
    }

    func startDaemon() async throws {
        try launchDaemon()
        let log = daemonLog
        let probe = try await Connection.open(.address(bus.address))
        defer { probe.close() }
        for _ in 0..<500 {
            if try await probe.nameOwner("org.example.Downloads") != nil { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("downloadsd did not take its name; log: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    /// SIGKILL: no chance to checkpoint or clean up.
    func killDaemon() {
        daemon?.signal(SIGKILL)
        daemon?.wait()
        daemon = nil
    }

    func stopDaemon() {
        daemon?.stop()
        daemon = nil
    }

    // MARK: Calls

    func call(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        do {
            return try await client.call(
                destination: "org.example.Downloads", path: "/org/example/Downloads",
                interface: "org.example.Downloads",
                method: method, arguments: arguments
            )
        } catch let error as BusError where error.name == BusError.noReplyName {
            await diagnose("\(method) got no reply")
            throw error
        }
    }

    /// When the daemon does not answer: its log and every thread's stack, for the test output.
    func diagnose(_ what: String) async {
        print("DIAGNOSIS: \(what)")
        print((try? String(contentsOfFile: daemonLog, encoding: .utf8)) ?? "(no log)")
        if let pid = daemon?.pid {
            let trace = try? await ProcessRunner.run(
                ["gdb", "-p", "\(pid)", "-batch", "-ex", "thread apply all bt 20"], timeout: 60)
            print(
                trace?.stdout.split(separator: "\n").filter { $0.hasPrefix("#") || $0.hasPrefix("Thread") }.joined(
                    separator: "\n") ?? "")
        }
    }

    func start(_ url: String, _ destination: String, _ options: [String: DBusValue] = [:]) async throws -> ObjectPath {
        let reply = try await call("Start", [.string(url), .string(destination), .vardict(options)])
        return try XCTUnwrap(reply.first?.objectPathValue)
    }

    func property(_ path: ObjectPath, _ name: String) async throws -> DBusValue? {
        try await client.call(
            destination: "org.example.Downloads", path: path, interface: "org.freedesktop.DBus.Properties",
            method: "Get", arguments: [.string("org.example.Downloads.Task"), .string(name)]
        ).first?.variantValue
    }

    /// A task's `GetMetrics` reply: its own times and counts, and one dictionary a request.
    func getMetrics(_ task: ObjectPath) async throws -> (task: [String: DBusValue], transactions: [[String: DBusValue]])
    {
        let reply = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task",
            method: "GetMetrics")
        guard reply.count == 2, let summary = reply[0].vardictValue, case .array(_, let list) = reply[1] else {
            throw BusError(name: "org.freedesktop.DBus.Error.InvalidSignature", message: "GetMetrics answered \(reply)")
        }
        return (summary, list.compactMap(\.vardictValue))
    }

    /// Waits (bounded) until the task's State is one of `states`.
    @discardableResult
    func waitState(_ path: ObjectPath, _ states: Set<String>, seconds: Double = 60) async throws -> String {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var last = ""
        while ContinuousClock.now < deadline {
            if let state = try? await property(path, "State")?.stringValue {
                last = state
                if states.contains(state) { return state }
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("\(path) did not reach \(states) (is \(last))")
        await diagnose("\(path) did not reach \(states) (is \(last))")
        return last
    }

    /// What another connection on the bus can do to every client: a manager signal in the
    /// service's interface (`member` with `arguments`), broadcast and sent to each connection.
    func forgeManagerSignal(_ member: String, _ arguments: [DBusValue]) async throws {
        let forger = try await Connection.open(.address(bus.address))
        defer { forger.close() }
        let names =
            try await forger.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "ListNames"
            ).first?.stringArrayValue ?? []
        for destination in [nil] + names.filter({ $0.hasPrefix(":") }) {
            try forger.emitSignal(
                path: "/org/example/Downloads", interface: "org.example.Downloads", name: member,
                arguments: arguments, destination: destination)
        }
        forger.flush()
    }

    /// Waits (bounded) until `condition` holds; on a timeout the failure shows `log` (default: the daemon's).
    func until(
        _ what: String, seconds: Double = 20, log: String? = nil, _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        // The daemon's log is printed by tearDown when a test failed; another log named here, now.
        guard let log else { return XCTFail("timed out waiting for \(what) (the daemon's log follows the test)") }
        XCTFail("timed out waiting for \(what); \(log):\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    func waitBytes(_ path: ObjectPath, atLeast bytes: Int64, seconds: Double = 30) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let written = try? await property(path, "BytesWritten")?.int64Value, written >= bytes { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("\(path) did not write \(bytes) bytes")
    }

    func run(_ arguments: [String], timeout: TimeInterval = 60) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(arguments, environment: bus.environment, timeout: timeout)
    }

    func gdbus(
        _ method: String, _ arguments: [String], object: String = "/org/example/Downloads",
        interface: String = "org.example.Downloads"
    ) async throws -> ProcessRunner.Output {
        try await run(
            [
                "gdbus", "call", "--address", bus.address, "--dest", "org.example.Downloads", "--object-path", object,
                "--method", "\(interface).\(method)",
            ] + arguments)
    }

    func signalNames(for path: ObjectPath) -> [String] {
        signals.withLockedValue { $0 }.filter { $0.1.first?.objectPathValue == path }.map(\.0)
    }

    static func content(_ size: Int, seed: UInt32 = 1) -> [UInt8] { TestData.content(size, seed: seed) }
    static func sha256(_ bytes: [UInt8]) -> String { TestData.sha256(bytes) }
    func sha256(ofFile path: String) -> String? { TestData.sha256(ofFile: path) }
}
