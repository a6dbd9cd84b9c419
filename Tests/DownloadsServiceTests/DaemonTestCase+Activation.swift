import DBus
import Foundation
import TestSupport
import XCTest

/// The daemon as a desktop starts it: by D-Bus activation, from a service file in the test bus's
/// servicedir, with an idle time after which it exits. Every instance appends its pid to
/// `activations` and its log to `daemon-activated.log`.
extension DaemonTestCase {
    var activationsFile: String { directory.file("activations") }

    /// Stops the daemon the test case launched and makes the name activatable: the next call to
    /// org.example.Downloads starts `downloadsd … --exit-idle-time SECONDS` (and `environment`).
    func switchToActivation(exitIdleTime: Double, environment: [String: String] = [:]) throws {
        stopDaemon()
        let log = directory.file("daemon-activated.log")
        daemonLog = log
        let settings = bus.environment.merging(daemonEnvironment) { $1 }.merging(environment) { $1 }
            .sorted { $0.key < $1.key }.map { "\($0.key)='\($0.value)'" }.joined(separator: " ")
        let arguments =
            (["--state-dir", stateDirectory] + busArguments + ["--exit-idle-time", "\(exitIdleTime)"] + extraArguments)
            .map { "'\($0)'" }.joined(separator: " ")
        let script = directory.file("activate.sh")
        try """
        echo $$ >> '\(activationsFile)'
        exec env \(settings) '\(DaemonTestCase.binary)' \(arguments) 2>>'\(log)'
        """.write(toFile: script, atomically: true, encoding: .utf8)
        try """
        [D-BUS Service]
        Name=org.example.Downloads
        Exec=/bin/sh \(script)
        """.write(toFile: bus.servicesDirectory + "/org.example.Downloads.service", atomically: true, encoding: .utf8)
    }

    /// The pids of the instances activation started, in order.
    var activations: [Int32] {
        ((try? String(contentsOfFile: activationsFile, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            Int32($0)
        }
    }

    /// Whether `pid` is alive (a zombie its parent has not reaped yet has exited).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.range(of: ") ", options: .backwards)
        else { return false }
        return stat[end.upperBound...].first != "Z"
    }

    /// Waits until no instance owns the name and every activated process is gone.
    func waitUntilTheDaemonExits(seconds: Double = 30) async throws {
        try await until("the activated daemon to exit", seconds: seconds) {
            let owner = try await self.client.nameOwner("org.example.Downloads")
            return owner == nil && !self.activations.contains { Self.isRunning($0) }
        }
    }

    func stopActivatedDaemons() {
        guard directory != nil else { return }
        for pid in activations where Self.isRunning(pid) {
            kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(10)
            while Self.isRunning(pid), Date() < deadline { usleep(20_000) }
            if Self.isRunning(pid) { kill(pid, SIGKILL) }
        }
    }
}
