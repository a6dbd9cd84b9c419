import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List your tasks.")

    @OptionGroup var service: ServiceOptions
    @Option(help: "Only the tasks of this session.") var session: String?
    @Option(
        help: ArgumentHelp(
            "Only the tasks whose metadata has KEY set to the string VALUE (repeatable: all must match).",
            valueName: "key=value"))
    var metadata: [String] = []
    @Option(
        name: .customLong("state"),
        help: ArgumentHelp(
            "Only the tasks in this state: queued, running, paused, retrying, finished, failed or cancelled (repeatable: any of them).",
            valueName: "state"
        ), completion: .list(TaskState.allCases.map(\.rawValue)))
    var states: [String] = []
    @Flag(
        name: [.customShort("q"), .long], help: "Only the task ids, one a line (for cancel, pause, resume and wait).")
    var quiet = false
    @Flag(help: "One JSON array of task objects.") var json = false

    func validate() throws {
        let known = TaskState.allCases.map(\.rawValue)
        for state in states where !known.contains(state) {
            throw ValidationError("--state \(state) is not a state: \(known.joined(separator: ", "))")
        }
        if quiet && json { throw ValidationError("--quiet and --json exclude each other") }
    }

    func run() async throws {
        try await service.run { proxy in
            var statuses = try await proxy.statuses(session: session ?? "")
            if !metadata.isEmpty {
                let match = try TaskOptionArguments.metadata(metadata, option: "--metadata").mapValues {
                    DBusValue.string($0)
                }
                let found = Set(try await proxy.findTasks(matching: match).compactMap(DownloadsAPI.taskID))
                statuses = statuses.filter { found.contains($0.id) }
            }
            if !states.isEmpty { statuses = statuses.filter { states.contains($0.state) } }
            if quiet {
                for status in statuses { print(status.id) }
            } else if json {
                print(TaskRow.json(statuses.map(TaskRow.init)))
            } else if statuses.isEmpty {
                print("no tasks")
            } else {
                print(TaskRow.table(statuses))
            }
        }
    }
}
