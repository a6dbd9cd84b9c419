import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

struct GroupStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show a group: its state, files and bytes (and its tasks with --json).")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A group id or object path.") var group: GroupArgument
    @Flag(help: "The group as one JSON object.") var json = false

    func run() async throws {
        try await service.run { proxy in
            let status = try await proxy.groupStatus(group.path)
            if json {
                print(Self.json([status]).dropFirst().dropLast())
            } else {
                print("ID  STATE      FILES        SIZE        ATOMIC  TITLE")
                print(Self.row(status))
                if status.filesFailed > 0 { print("\(status.filesFailed) failed; see: \(service.command("list"))") }
            }
        }
    }

    static func row(_ status: DownloadGroupStatus) -> String {
        let files = "\(status.filesFinished) of \(status.files)"
        let size =
            status.bytesExpected >= 0
            ? "\(ByteCount.format(status.bytesWritten))/\(ByteCount.format(status.bytesExpected))"
            : ByteCount.format(status.bytesWritten)
        func padded(_ text: String, _ width: Int) -> String {
            text + String(repeating: " ", count: max(1, width - text.count))
        }
        return padded("\(status.id)", 4) + padded(status.state, 11) + padded(files, 13) + padded(size, 12)
            + padded(status.atomic ? "yes" : "no", 8) + DisplayText.escaped(status.title)
    }

    static func json(_ statuses: [DownloadGroupStatus]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(statuses)) ?? Data("[]".utf8), as: UTF8.self)
    }
}
