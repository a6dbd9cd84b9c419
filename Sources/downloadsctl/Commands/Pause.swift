import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause tasks (optionally keeping one's resume data in a file).")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "Task ids or object paths.") var tasks: [TaskArgument]
    @Option(
        name: .customLong("resume-data"),
        help: ArgumentHelp("Write the resume data to this file (mode 0600; one task).", valueName: "file"))
    var resumeData: String?

    func validate() throws {
        if tasks.isEmpty { throw ValidationError("give the TASK to pause (or several)") }
        if resumeData != nil && tasks.count > 1 { throw ValidationError("--resume-data is written for one task") }
    }

    func run() async throws {
        try await service.run { proxy in
            try await service.forEach(tasks) { task in
                let data = try await proxy.pause(task.path)
                if let resumeData { try Paths.writeResumeData(data, to: resumeData) }
                print("paused task \(Paths.id(task.path))")
            }
        }
    }
}
