import ArgumentParser
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A live view of your tasks with the speed of each running one (redrawn every second on a terminal; a line per change otherwise). Ctrl-C ends it."
    )

    @OptionGroup var service: ServiceOptions
    @Option(help: "Only the tasks of this session.") var session: String?

    func run() async throws {
        let interrupt = Interrupt()
        let terminal = isatty(STDOUT_FILENO) == 1
        try await service.run { proxy in
            var last: [UInt64: String] = [:]
            // The speed of each running task, from the bytes it had at each look.
            var meters: [UInt64: ProgressLine] = [:]
            while !interrupt.isRaised {
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
                    output("\u{1B}[H\u{1B}[2J" + (statuses.isEmpty ? "no tasks" : TaskRow.table(statuses, speeds: speeds)))
                } else {
                    for status in statuses {
                        let line = TaskRow.line(status, speed: speeds[status.id])
                        if last[status.id] != line {
                            output(line)
                            last[status.id] = line
                        }
                    }
                }
                for _ in 0..<10 where !interrupt.isRaised { try await Task.sleep(for: .milliseconds(100)) }
            }
        }
    }

    /// Unbuffered, so a pipe sees each line when it happens.
    private func output(_ line: String) {
        Output.write(line + "\n", to: STDOUT_FILENO)
    }
}
