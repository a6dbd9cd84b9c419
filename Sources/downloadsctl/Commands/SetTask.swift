import ArgumentParser
import DownloadsAPI
import FoundationEssentials

/// `downloadsctl set TASK …`: the task's `Update`, for what may change while it exists.
struct SetTask: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change a task while it exists: its priority, bandwidth limit, headers, title…",
        discussion: """
            Applied at once: a running transfer takes a new limit within a second, a new priority at the \
            service's next scheduling decision, new headers (a refreshed token) from its next request. \
            --header replaces all of the task's headers.
            """
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The task's id or object path.") var task: TaskArgument
    @Option(help: ArgumentHelp("low, normal or high.", valueName: "priority")) var priority: String?
    @Option(
        name: .customLong("limit-rate"),
        help: ArgumentHelp("At most this many bytes per second (500K, 1.5M; 0: no limit).", valueName: "bytes"))
    var limitRate: ByteRate?
    @Option(
        name: .customLong("header"),
        help: ArgumentHelp(
            "An HTTP header, 'Name: value' (repeatable; replaces the task's headers).", valueName: "header"))
    var headers: [String] = []
    @Option(
        help: ArgumentHelp("What the task is called where the desktop shows it (\"\" clears it).", valueName: "text"))
    var title: String?
    @Option(help: ArgumentHelp("A line about the task (\"\" clears it).", valueName: "text")) var description: String?
    @Option(
        name: .customLong("metadata"),
        help: ArgumentHelp("Your own data, KEY=VALUE (repeatable; replaces the task's).", valueName: "key=value"))
    var metadata: [String] = []
    @Option(
        help: ArgumentHelp(
            "yes: use only the bandwidth nobody else is using; no: as any transfer.", valueName: "yes|no"))
    var background: String?
    @Option(help: ArgumentHelp("yes: may use a metered network; no: waits for an unmetered one.", valueName: "yes|no"))
    var metered: String?
    @Option(
        name: .customLong("requires-ac-power"),
        help: ArgumentHelp(
            "yes: waits while on battery (paused when unplugged); no: runs on battery too.", valueName: "yes|no"))
    var requiresACPower: String?

    var taskOptions: TaskOptions {
        get throws {
            var options = TaskOptions()
            if let priority {
                guard let value = TaskOptions.Priority(rawValue: priority) else {
                    throw ValidationError("--priority must be low, normal or high")
                }
                options.priority = value
            }
            options.maxBytesPerSecond = limitRate?.bytes
            if !headers.isEmpty { options.headers = try TaskOptionArguments.headers(headers) }
            options.title = title
            options.taskDescription = description
            if !metadata.isEmpty {
                options.metadata = try TaskOptionArguments.metadata(metadata, option: "--metadata").mapValues {
                    .string($0)
                }
            }
            options.background = try background.map { try Self.yesNo($0, "--background") }
            options.allowMetered = try metered.map { try Self.yesNo($0, "--metered") }
            options.requiresACPower = try requiresACPower.map { try Self.yesNo($0, "--requires-ac-power") }
            return options
        }
    }

    static func yesNo(_ text: String, _ option: String) throws -> Bool {
        switch text.lowercased() {
        case "yes", "true", "1": return true
        case "no", "false", "0": return false
        default: throw ValidationError("\(option) must be yes or no")
        }
    }

    func validate() throws {
        if try taskOptions.dictionary.isEmpty {
            throw ValidationError("say what to change: --priority, --limit-rate, --header, --title, …")
        }
    }

    func run() async throws {
        let options = try taskOptions
        try await service.run { [options] proxy in
            try await proxy.update(task.path, options: options)
            print("updated task \(Paths.id(task.path)): \(options.dictionary.keys.sorted().joined(separator: ", "))")
        }
    }
}
