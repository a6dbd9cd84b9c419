import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

extension MultiUserTests {
    /// A user whose file helper does not answer (their home on a hung mount, a helper stopped)
    /// holds up their own `Start`s until the helper's timeout, and nobody else's calls: the
    /// destination checks wait on threads of their own, not on the pool every call and every
    /// transfer of the daemon runs on. Thirty such checks at once: on the cooperative pool (as
    /// wide as the cores, growing by a thread about every second while its threads block), the
    /// root's `ListTasks` and B's `Start` waited behind all thirty, past the helper's timeout.
    func testAUsersHungFileHelperHoldsUpNoOneElse() async throws {
        let aHome = try makeDirectory("a", owner: users.a, mode: 0o700)
        let bHome = try makeDirectory("b", owner: users.b, mode: 0o700)
        http.set("/small", Route(content: Self.content(10_000)))
        // A's helpers stop themselves before they answer; B's work as usual.
        let wrapper = directory.file("hanging-helper")
        let helper = PackageRoot.debugBinary("downloads-file-helper")
        try """
        #!/bin/sh
        if [ "$2" = "\(users.a.uid)" ]; then kill -STOP $$; fi
        exec \(helper) "$@"
        """.write(toFile: wrapper, atomically: true, encoding: .utf8)
        chmod(wrapper, 0o755)
        let stopped: @Sendable () -> [pid_t] = { Self.stoppedProcesses(running: wrapper) }
        addTeardownBlock { for pid in stopped() { kill(pid, SIGKILL) } }
        daemon?.stop()
        helperArguments = ["--file-helper", wrapper, "--file-helper-timeout", "20"]
        try await startDaemon()

        // A sends thirty Starts at once and records each answer as it comes.
        let calls = try CallsInFlight(answersFile: directory.file("a-answers"))
        let url = http.url("/small")
        let script = calls.script(
            busAddress: bus.address, count: 30,
            sends: """
                for i in range(30):
                    m.Start('\(url)', '\(aHome)/%d' % i, dbus.Dictionary({}, signature='sv'), timeout=120, reply_handler=ok, error_handler=err)
                """)
        let a = try ChildProcess(
            [
                "setpriv", "--reuid=\(users.a.uid)", "--regid=\(users.a.gid)", "--init-groups", "--reset-env",
                "/usr/bin/python3", "-c", script,
            ], environment: bus.environment)
        addTeardownBlock { a.stop() }
        let answers = calls.answers
        try await until("A's Starts sent and A's helper hung") { answers().contains("sent") && !stopped().isEmpty }

        // The root's call and B's download go through while every one of A's Starts still waits.
        let tasks = try await call("ListTasks", [.string("")])
        XCTAssertNotNil(tasks.first?.objectPathArrayValue)
        let b = try await python(
            as: users.b,
            """
            mine = start('\(url)', '\(bHome)/mine')
            out['state'] = wait(mine, ['finished', 'failed'])
            """)
        XCTAssertEqual(b["state"] as? String, "finished", "\(b)")
        XCTAssertEqual(answers(), ["sent"], "A's Starts are still waiting for A's helper")

        // A's helper comes back: A's Starts are answered.
        for pid in stopped() { kill(pid, SIGCONT) }
        try await until("every one of A's Starts answered", seconds: 60) { answers().count == 31 }
        XCTAssertTrue(answers().contains { $0.hasPrefix("ok /org/example/Downloads/") }, "\(answers())")
    }

    /// Processes stopped (state T) whose command line names `script`.
    static func stoppedProcesses(running script: String) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                let status = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let state = status.split(separator: ")").last?.split(separator: " ").first, state == "T",
                let command = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                String(decoding: command, as: UTF8.self).contains(script)
            else { return nil }
            return pid
        }
    }
}
