import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct GroupPause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause", abstract: "Pause every file of a group (optionally keeping its resume data in a file).")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A group id or object path.") var group: GroupArgument
    @Option(
        name: .customLong("resume-data"),
        help: ArgumentHelp("Write the group's resume data to this file (mode 0600).", valueName: "file"))
    var resumeData: String?

    func run() async throws {
        try await service.run { proxy in
            let data = try await proxy.pauseGroup(group.path)
            if let resumeData { try Paths.writeResumeData(data, to: resumeData) }
            print("paused group \(Paths.id(group.path))")
        }
    }
}
