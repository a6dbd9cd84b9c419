import ArgumentParser
import DBus
import DownloadsClient
import TerminalOutput
import ShownText

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
            // A task's end is heard as a signal (subscribed before the first look, so none is
            // missed) and then read; every two seconds the rest are read again, in case the
            // service restarted meanwhile. Waiting for hundreds of tasks asks nothing while
            // they run.
            let (events, sink) = AsyncStream.makeStream(of: ObjectPath?.self)
            let signals = try await ServiceSignals(proxy, tick: .seconds(2)) { item in
                switch item {
                case .signal(.finished(let path, _)), .signal(.failed(let path, _, _, _)),
                    .signal(.stateChanged(let path, "cancelled")):
                    sink.yield(path)
                case .tick:
                    sink.yield(nil)
                default:
                    break
                }
            }
            defer {
                signals.close()
                sink.finish()
            }

            var pending = tasks.map(\.path)
            var failures: [String] = []
            /// Reads `paths` and takes those that ended off `pending`, saying how each ended.
            func look(_ paths: [ObjectPath]) async throws {
                for path in paths {
                    let status = try await proxy.status(path)
                    guard status.isEnded, pending.contains(path) else { continue }
                    pending.removeAll { $0 == path }
                    if status.state == "finished" {
                        print("task \(status.id) finished: \(DisplayText.escaped(status.destination))")
                    } else {
                        failures.append(
                            "task \(status.id) \(status.state)"
                                + (status.errorMessage.isEmpty ? "" : ": \(DisplayText.escaped(status.errorMessage))")
                        )
                    }
                }
            }
            try await look(pending)
            if !pending.isEmpty {
                for await path in events {
                    if let path {
                        if pending.contains(path) { try await look([path]) }
                    } else {
                        try await look(pending)
                    }
                    if pending.isEmpty { break }
                }
            }
            if !failures.isEmpty { throw CommandFailure(message: failures.joined(separator: "; ")) }
        }
    }
}
