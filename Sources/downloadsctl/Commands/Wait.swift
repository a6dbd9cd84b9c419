import ArgumentParser
import TerminalOutput

struct Wait: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait until tasks end; exit 0 when all of them finished, 1 when any failed or was cancelled."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "Task ids or object paths.") var tasks: [TaskArgument]

    func validate() throws {
        guard !tasks.isEmpty else { throw ValidationError("name at least one task") }
    }

    func run() async throws {
        try await service.run { proxy in
            var pending = tasks.map(\.path)
            var failures: [String] = []
            while !pending.isEmpty {
                var still = pending
                for path in pending {
                    let status = try await proxy.status(path)
                    guard status.isEnded else { continue }
                    still.removeAll { $0 == path }
                    if status.state == "finished" {
                        print("task \(status.id) finished: \(DisplayText.escaped(status.destination))")
                    } else {
                        failures.append(
                            "task \(status.id) \(status.state)" + (status.errorMessage.isEmpty ? "" : ": \(DisplayText.escaped(status.errorMessage))")
                        )
                    }
                }
                pending = still
                if !pending.isEmpty { try await Task.sleep(for: .milliseconds(250)) }
            }
            if !failures.isEmpty { throw CommandFailure(message: failures.joined(separator: "; ")) }
        }
    }
}
