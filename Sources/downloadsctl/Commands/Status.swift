import ArgumentParser
import TerminalOutput
import ShownText

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one task.")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A task id or object path.") var task: TaskArgument
    @Flag(help: "One JSON object.") var json = false

    func run() async throws {
        try await service.run { proxy in
            let status = try await proxy.status(task.path)
            if json {
                print(TaskRow.json(TaskRow(status)))
                return
            }
            let progress =
                status.bytesExpected > 0
                ? "\(ByteCount.format(status.bytesWritten)) of \(ByteCount.format(status.bytesExpected))"
                : ByteCount.format(status.bytesWritten)
            var lines = [
                "task:        \(status.id)", "kind:        \(status.kind)", "state:       \(status.state)",
                "progress:    \(progress)",
                "url:         \(DisplayText.escaped(status.url))",
            ]
            if status.state == "running" {
                var speed = "speed:       \(ByteCount.format(Int64(clamping: status.speed)))/s"
                if status.speed > 0, status.bytesExpected > status.bytesWritten {
                    let seconds = (status.bytesExpected - status.bytesWritten) / Int64(clamping: status.speed)
                    speed += ", \(ByteCount.duration(Double(seconds))) left"
                }
                lines.append(speed)
            }
            if status.priority != "normal" { lines.append("priority:    \(status.priority)") }
            if status.maxBytesPerSecond > 0 {
                lines.append("limit:       \(ByteCount.format(Int64(clamping: status.maxBytesPerSecond)))/s")
            }
            if status.isUpload {
                lines.append("source:      \(DisplayText.escaped(status.source))")
                if !status.destination.isEmpty {
                    lines.append("reply to:    \(DisplayText.escaped(status.destination))")
                }
                if status.bytesConfirmed > 0 {
                    lines.append(
                        "confirmed:   \(ByteCount.format(status.bytesConfirmed)) (the server holds them: a cut or a restart goes on from there)"
                    )
                }
                if status.responseStatus != 0 { lines.append("response:    \(status.responseStatus)") }
            } else {
                lines.append("destination: \(DisplayText.escaped(status.destination))")
            }
            lines.append("session:     \(DisplayText.escaped(status.session))")
            if !status.title.isEmpty { lines.insert("title:       \(DisplayText.escaped(status.title))", at: 1) }
            if !status.taskDescription.isEmpty {
                lines.append("description: \(DisplayText.escaped(status.taskDescription))")
            }
            for (key, value) in status.metadata.sorted(by: { $0.key < $1.key }) {
                lines.append(
                    "metadata:    \(DisplayText.escaped(key)) = \(DisplayText.escaped(MetadataJSON.text(value)))")
            }
            if status.background { lines.append("background:  yes (uses only spare bandwidth)") }
            if status.waitingFor == "yielding" {
                lines.append("yielding:    other traffic is using the link; this background download gives way")
            } else if !status.waitingFor.isEmpty {
                lines.append("waiting for: \(status.waitingFor)")
            }
            if !status.error.isEmpty {
                lines.append("error:       \(DisplayText.escaped(status.errorMessage)) (\(status.error))")
            }
            print(lines.joined(separator: "\n"))
        }
    }
}
