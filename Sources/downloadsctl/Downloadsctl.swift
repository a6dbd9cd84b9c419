import ArgumentParser

/// downloadsctl: the command line of org.example.Downloads, over DownloadsClient.
@main
struct Downloadsctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downloadsctl",
        abstract: "Download files through the org.example.Downloads service, and control its downloads.",
        discussion: """
            Downloads run in the service: they go on when downloadsctl exits, survive restarts, and can \
            be paused and resumed (also from resume data). TASK is a task id or object path. \
            --user, --system, --address and --verbose may come before or after the command. \
            Exit status: 0 success; 1 a service error or a failed, cancelled or missing task; 64 a usage \
            error; 69 the service cannot be reached; 130 interrupted (get pauses its task first).
            """,
        subcommands: [
            Get.self, Upload.self, Start.self, List.self, Status.self, Show.self, SetTask.self, Pause.self,
            Resume.self, Cancel.self, Wait.self, Watch.self, Group.self,
        ]
    )

    /// `downloadsctl --system list` as well as `downloadsctl list --system`: the service options
    /// given before the command are moved after it, where the command's parser takes them.
    static func main() async {
        await main(Self.reordered(Array(CommandLine.arguments.dropFirst())))
    }

    static func reordered(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if ["--user", "--system", "--verbose"].contains(word) {
                leading.append(word)
                index += 1
            } else if word == "--address", index + 1 < arguments.count {
                leading += [word, arguments[index + 1]]
                index += 2
            } else if word.hasPrefix("--address=") {
                leading.append(word)
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count, !arguments[index].hasPrefix("-") else { return arguments }
        // `group list`: the options go after the subcommand's own name.
        let words =
            arguments[index] == "group" && index + 1 < arguments.count && !arguments[index + 1].hasPrefix("-") ? 2 : 1
        return Array(arguments[index..<(index + words)]) + leading + arguments[(index + words)...]
    }
}
