import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

struct GroupList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List your groups: id, state, files done, bytes, title.")

    @OptionGroup var service: ServiceOptions
    @Option(help: ArgumentHelp("Only this session's groups.", valueName: "name")) var session = ""
    @Flag(help: "One JSON array of group objects.") var json = false

    func run() async throws {
        try await service.run { proxy in
            var statuses: [DownloadGroupStatus] = []
            for path in try await proxy.listGroups(session: session) {
                if let status = try? await proxy.groupStatus(path) { statuses.append(status) }
            }
            if json {
                print(GroupStatus.json(statuses))
            } else if statuses.isEmpty {
                print("no groups")
            } else {
                print("ID  STATE      FILES        SIZE        ATOMIC  TITLE")
                for status in statuses { print(GroupStatus.row(status)) }
            }
        }
    }
}
