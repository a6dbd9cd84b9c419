import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Start: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Start a download and print its task id.")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The http or https URL, or a Metalink file (.meta4).") var url: String
    @Argument(help: "The file to write, or an existing directory (or -o, as for get).") var destination: String?
    @Option(
        name: .shortAndLong,
        help: ArgumentHelp(
            "The file to write, or an existing directory (the name then comes from the server). Default: the current directory.",
            valueName: "path"
        ))
    var output: String?
    @OptionGroup var options: TaskOptionArguments

    func validate() throws {
        if destination != nil && output != nil {
            throw ValidationError("give the destination once: as an argument or with -o, not both")
        }
    }

    func run() async throws {
        let destination = Paths.absolute(destination ?? output ?? FileManager.default.currentDirectoryPath)
        var taskOptions = try options.taskOptions(into: destination)
        let url = try TaskOptionArguments.source(url, into: &taskOptions)
        try await service.run { [taskOptions] proxy in
            let path = try await CommandFailure.sayingOverwrite(destination) {
                try await proxy.start(url: url, destination: destination, options: taskOptions)
            }
            print(Paths.id(path))
        }
    }
}
