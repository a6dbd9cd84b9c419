import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resume a paused or failed task, or continue a download from resume data (prints the task id)."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A task id or object path.") var task: TaskArgument?
    @Option(name: .customLong("resume-data"), help: ArgumentHelp("A file written by 'pause --resume-data'.", valueName: "file"))
    var resumeData: String?

    func validate() throws {
        guard (task == nil) != (resumeData == nil) else { throw ValidationError("give a TASK or --resume-data FILE (one of them)") }
    }

    func run() async throws {
        try await service.run { proxy in
            if let task {
                try await proxy.resume(task.path)
                print("resumed task \(Paths.id(task.path))")
            } else if let resumeData {
                let path = Paths.absolute(resumeData)
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw CommandFailure(message: "cannot read the resume data in \(path)")
                }
                print(Paths.id(try await proxy.resume(resumeData: data)))
            }
        }
    }
}
