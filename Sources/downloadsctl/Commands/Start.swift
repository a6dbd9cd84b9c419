import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Start: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Start a download and print its task id.")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The http or https URL.") var url: String
    @Argument(help: "The file to write, or an existing directory.") var destination: String
    @OptionGroup var options: TaskOptionArguments

    func run() async throws {
        let taskOptions = try options.taskOptions
        try await service.run { proxy in
            let path = try await proxy.start(url: url, destination: Paths.absolute(destination), options: taskOptions)
            print(Paths.id(path))
        }
    }
}
