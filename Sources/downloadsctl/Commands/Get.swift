import ArgumentParser
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a URL and follow it to the end.",
        discussion: "Prints the file's path when it is complete. Ctrl-C pauses the download and prints how to resume it."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The http or https URL, or a Metalink file (.meta4): its URLs are the URL and mirrors, its hash the checksum.") var url: String
    @Option(name: .shortAndLong, help: ArgumentHelp(
        "The file to write, or an existing directory (the name then comes from the server). Default: the current directory.",
        valueName: "path"
    ))
    var output: String?
    @OptionGroup var options: TaskOptionArguments

    func run() async throws {
        let destination = Paths.absolute(output ?? FileManager.default.currentDirectoryPath)
        var taskOptions = try options.taskOptions
        let url = try TaskOptionArguments.source(url, into: &taskOptions)
        try await service.run { [taskOptions] proxy in
            let path = try await proxy.start(url: url, destination: destination, options: taskOptions)
            let file = try await TaskFollower(proxy: proxy, path: path, service: service).follow()
            // Escaped on a terminal (as ls does); as it is for a script reading the path.
            print(isatty(STDOUT_FILENO) == 1 ? DisplayText.escaped(file) : file)
        }
    }
}
