import ArgumentParser
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "A live view of your tasks with the speed of each running one (redrawn every second on a terminal; a line per change otherwise). Ctrl-C ends it.",
        discussion: """
            While a task is queued, running or retrying, the view is refreshed every second; otherwise it waits for \
            the service's signals and calls nothing, so an idle service still exits (--exit-idle-time), and it \
            follows the service again when a call from elsewhere starts it.
            """
    )

    @OptionGroup var service: ServiceOptions
    @Option(help: "Only the tasks of this session.") var session: String?

    func run() async throws {
        let interrupt = Interrupt()
        let terminal = isatty(STDOUT_FILENO) == 1
        try await service.run { proxy in
            let changes = try await ServiceChanges(proxy)
            var last: [UInt64: String] = [:]
            // The speed of each running task, from the bytes it had at each look.
            var meters: [UInt64: ProgressLine] = [:]
            while !interrupt.isRaised {
                _ = changes.take()  // before the look: a change after it is seen at the next
                let statuses = try await proxy.statuses(session: session ?? "")
                let now = Date().timeIntervalSince1970
                var speeds: [UInt64: Double] = [:]
                var running: [UInt64: ProgressLine] = [:]
                for status in statuses where status.state == "running" {
                    var meter = meters[status.id] ?? ProgressLine()
                    speeds[status.id] = meter.measure(bytes: status.bytesWritten, at: now)
                    running[status.id] = meter
                }
                meters = running
                if terminal {
                    output(
                        "\u{1B}[H\u{1B}[2J" + (statuses.isEmpty ? "no tasks" : TaskRow.table(statuses, speeds: speeds)))
                } else {
                    for status in statuses {
                        let line = TaskRow.line(status, speed: speeds[status.id])
                        if last[status.id] != line {
                            output(line)
                            last[status.id] = line
                        }
                    }
                }
                // Calls every second only while there is work (the service is up anyway); with
                // none, a signal or the service's return is waited for.
                let active = statuses.contains { ["queued", "running", "retrying"].contains($0.state) }
                var waited = 0
                while !interrupt.isRaised, active ? waited < 10 : !changes.take() {
                    try await Task.sleep(for: .milliseconds(100))
                    waited += 1
                }
            }
        }
    }

    /// Unbuffered, so a pipe sees each line when it happens.
    private func output(_ line: String) {
        Output.write(line + "\n", to: STDOUT_FILENO)
    }
}
