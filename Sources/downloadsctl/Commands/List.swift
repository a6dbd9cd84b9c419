import ArgumentParser
import DownloadsClient

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List your tasks.")

    @OptionGroup var service: ServiceOptions
    @Option(help: "Only the tasks of this session.") var session: String?
    @Flag(help: "One JSON array of task objects.") var json = false

    func run() async throws {
        try await service.run { proxy in
            var statuses = [DownloadTaskStatus]()
            for path in try await proxy.listTasks(session: session ?? "") {
                // A task removed meanwhile is skipped.
                if let status = try? await proxy.status(path) { statuses.append(status) }
            }
            statuses.sort { $0.id < $1.id }
            if json {
                print(TaskRow.json(statuses.map(TaskRow.init)))
            } else if statuses.isEmpty {
                print("no tasks")
            } else {
                print(TaskRow.table(statuses))
            }
        }
    }
}
