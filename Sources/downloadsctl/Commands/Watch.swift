import ArgumentParser
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A live view of your tasks (redrawn every second on a terminal; a line per change otherwise). Ctrl-C ends it."
    )

    @OptionGroup var service: ServiceOptions
    @Option(help: "Only the tasks of this session.") var session: String?

    func run() async throws {
        let interrupt = Interrupt()
        let terminal = isatty(STDOUT_FILENO) == 1
        try await service.run { proxy in
            var last: [UInt64: String] = [:]
            while !interrupt.isRaised {
                let statuses = try await proxy.statuses(session: session ?? "")
                if terminal {
                    output("\u{1B}[H\u{1B}[2J" + (statuses.isEmpty ? "no tasks" : TaskRow.table(statuses)))
                } else {
                    for status in statuses {
                        let line = "task \(status.id) \(status.state) \(ProgressLine.plain(written: status.bytesWritten, expected: status.bytesExpected, speed: 0))"
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
