import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Pause a task (optionally keeping its resume data in a file).")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A task id or object path.") var task: TaskArgument
    @Option(name: .customLong("resume-data"), help: ArgumentHelp("Write the resume data to this file (mode 0600).", valueName: "file"))
    var resumeData: String?

    func run() async throws {
        try await service.run { proxy in
            let data = try await proxy.pause(task.path)
            if let resumeData {
                let path = Paths.absolute(resumeData)
                guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
                    throw CommandFailure(message: "paused, but cannot write the resume data to \(path)")
                }
            }
            print("paused task \(Paths.id(task.path))")
        }
    }
}
