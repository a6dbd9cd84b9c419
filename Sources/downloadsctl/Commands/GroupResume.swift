import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct GroupResume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a group's paused and failed files, or a group from its resume data (prints the group id)."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A group id or object path.") var group: GroupArgument?
    @Option(
        name: .customLong("resume-data"),
        help: ArgumentHelp("A file written by 'group pause --resume-data'.", valueName: "file"))
    var resumeData: String?

    func validate() throws {
        guard (group == nil) != (resumeData == nil) else {
            throw ValidationError("give a GROUP or --resume-data FILE (one of them)")
        }
    }

    func run() async throws {
        try await service.run { proxy in
            if let group {
                try await proxy.resumeGroup(group.path)
                print("resumed group \(Paths.id(group.path))")
            } else if let resumeData {
                let path = Paths.absolute(resumeData)
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw CommandFailure(message: "cannot read the resume data in \(path)")
                }
                print(Paths.id(try await proxy.resumeGroup(resumeData: data).group))
            }
        }
    }
}
