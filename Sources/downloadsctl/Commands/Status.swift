import ArgumentParser
import DownloadsClient
import TerminalOutput
import ShownText

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one task.")

    @OptionGroup var service: ServiceOptions
    @Argument(help: "A task id or object path.") var task: TaskArgument
    @Flag(help: "One JSON object.") var json = false
    @Flag(
        name: [.customShort("v"), .customLong("timings")],
        help:
            "Also where the time went: when it started, got its first byte and ended, what each source served, and each of its last 50 requests as a waterfall (GetMetrics; curl -w's timings)."
    )
    var timings = false

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
            if timings { lines += Self.timings(try await proxy.metrics(task.path)) }
            print(lines.joined(separator: "\n"))
        }
    }

    /// `GetMetrics` for a person: the task's times from its start, what each source served, and
    /// one line a request with its phases from the request's start (what the service saw).
    static func timings(_ timings: TaskTimings) -> [String] {
        var lines: [String] = []
        let summary = timings.task
        let start = TaskTimings.time("started_at", in: summary)
        func since(_ key: String) -> String? {
            guard let start, let time = TaskTimings.time(key, in: summary) else { return nil }
            return Self.milliseconds(Double(Int64(time) - Int64(start)) / 1000)
        }
        var times: [String] = []
        if let first = since("first_byte_at") { times.append("first byte \(first)") }
        if let end = since("ended_at") { times.append("ended \(end)") }
        let counts = ["attempts", "redirects", "restarts"].map { "\($0) \(summary[$0]?.uint32Value ?? 0)" }
        lines.append("timings:     " + (times + counts).joined(separator: ", "))
        if case .dictionary(_, _, let sources)? = summary["bytes_by_source"] {
            for source in sources {
                lines.append(
                    "served:      \(ByteCount.format(Int64(clamping: source.value.uint64Value ?? 0))) by \(DisplayText.escaped(source.key.stringValue ?? ""))"
                )
            }
        }
        for (index, transaction) in timings.transactions.enumerated() {
            let status = transaction["status"]?.uint32Value ?? 0
            let version = transaction["protocol"]?.stringValue ?? ""
            let range = transaction["range"]?.stringValue ?? ""
            var head = "#\(index + 1) \(status == 0 ? "---" : String(status)) \(version.isEmpty ? "-" : version)"
            head += " \(DisplayText.escaped(transaction["url"]?.stringValue ?? ""))"
            if !range.isEmpty { head += " (\(range))" }
            if transaction["source"]?.stringValue == "mirror" { head += " [mirror]" }
            if let address = transaction["remote_address"]?.stringValue {
                head += " at \(DisplayText.escaped(address))"
            }
            if let version = transaction["tls_version"]?.stringValue { head += " \(DisplayText.escaped(version))" }
            if let reused = transaction["reused_connection"]?.boolValue {
                head += reused ? ", reused connection" : ", new connection"
            }
            lines.append("request:     " + head)
            let phases = TaskTimings.phases(of: transaction).map { "\($0.name) \(Self.milliseconds($0.milliseconds))" }
            var detail = phases.joined(separator: ", ")
            let received = Int64(clamping: transaction["bytes_received"]?.uint64Value ?? 0)
            let sent = Int64(clamping: transaction["bytes_sent"]?.uint64Value ?? 0)
            if received > 0 { detail += "; \(ByteCount.format(received)) received" }
            if sent > 0 { detail += "; \(ByteCount.format(sent)) sent" }
            if let error = transaction["error"]?.stringValue { detail += "; \(DisplayText.escaped(error))" }
            lines.append("             " + detail)
        }
        return lines
    }

    /// `+12.3 ms`.
    static func milliseconds(_ value: Double) -> String {
        let tenths = Int64((value * 10).rounded())
        let sign = tenths < 0 ? "-" : "+"
        return "\(sign)\(abs(tenths) / 10).\(abs(tenths) % 10) ms"
    }
}
