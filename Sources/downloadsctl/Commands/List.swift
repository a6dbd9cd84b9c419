import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List your tasks.")

    @OptionGroup var service: ServiceOptions
    @Option(help: "Only the tasks of this session.") var session: String?
    @Option(help: ArgumentHelp("Only the tasks whose metadata has KEY set to the string VALUE (repeatable: all must match).", valueName: "key=value"))
    var metadata: [String] = []
    @Flag(help: "One JSON array of task objects.") var json = false

    func run() async throws {
        try await service.run { proxy in
            var statuses = try await proxy.statuses(session: session ?? "")
            if !metadata.isEmpty {
                let match = try TaskOptionArguments.metadata(metadata, option: "--metadata").mapValues { DBusValue.string($0) }
                let found = Set(try await proxy.findTasks(matching: match).compactMap(DownloadsAPI.taskID))
                statuses = statuses.filter { found.contains($0.id) }
            }
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
