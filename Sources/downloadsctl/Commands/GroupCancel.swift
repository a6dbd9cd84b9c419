import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct GroupCancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel a group's files that have not ended (their partial files removed)."
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A group id or object path.") var group: GroupArgument

    func run() async throws {
        try await service.run { proxy in
            try await proxy.cancelGroup(group.path)
            print("cancelled group \(Paths.id(group.path))")
        }
    }
}
