import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Start: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Start a download and print its task id.")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The http or https URL, or a Metalink file (.meta4).") var url: String
    @Argument(help: "The file to write, or an existing directory.") var destination: String
    @OptionGroup var options: TaskOptionArguments

    func run() async throws {
        var taskOptions = try options.taskOptions
        let url = try TaskOptionArguments.source(url, into: &taskOptions)
        try await service.run { [taskOptions] proxy in
            let path = try await proxy.start(url: url, destination: Paths.absolute(destination), options: taskOptions)
            print(Paths.id(path))
        }
    }
}
