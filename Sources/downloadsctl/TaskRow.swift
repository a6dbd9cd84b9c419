import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

/// One task as `list --json` and `status --json` print it (the keys are documented in DESIGN.md).
struct TaskRow: Encodable {
    let id: UInt64
    let session: String
    /// The sandboxed app the task belongs to (a Flatpak app id, `snap.NAME`), "" for the host.
    let app: String
    let url: String
    let destination: String
    let state: String
    let bytesWritten: Int64
    let bytesExpected: Int64
    let error: String
    let errorMessage: String
    let waitingFor: String
    let background: Bool
    let title: String
    let description: String
    let metadata: [String: MetadataJSON]
    /// `download` or `upload`; an upload's file and final status.
    let kind: String
    let source: String
    let responseStatus: UInt32
    /// A resumable upload's bytes the server confirmed.
    let bytesConfirmed: Int64
    /// `Priority`, `MaxBytesPerSecond` and `Speed`.
    let priority: String
    let maxBytesPerSecond: UInt64
    let speed: UInt64

    enum CodingKeys: String, CodingKey {
        case id, session, app, url, destination, state, error, background, title, description, metadata, kind, source
        case responseStatus = "response_status", bytesConfirmed = "bytes_confirmed"
        case priority, maxBytesPerSecond = "max_bytes_per_second", speed
        case bytesWritten = "bytes_written", bytesExpected = "bytes_expected", errorMessage = "error_message"
        case waitingFor = "waiting_for"
    }

    init(_ status: DownloadTaskStatus) {
        id = status.id
        session = status.session
        app = status.app
        url = status.url
        destination = status.destination
        state = status.state
        bytesWritten = status.bytesWritten
        bytesExpected = status.bytesExpected
        error = status.error
        errorMessage = status.errorMessage
        waitingFor = status.waitingFor
        background = status.background
        title = status.title
        description = status.taskDescription
        metadata = status.metadata.mapValues(MetadataJSON.init)
        kind = status.kind
        source = status.source
        responseStatus = status.responseStatus
        bytesConfirmed = status.bytesConfirmed
        priority = status.priority
        maxBytesPerSecond = status.maxBytesPerSecond
        speed = status.speed
    }

    static func json<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
    }

    /// `  3 running     42%  downloadsctl  /home/me/file.iso`; with `speeds` (what `watch` has
    /// measured of each running task) also the speed and the time left.
    static func table(_ statuses: [DownloadTaskStatus], speeds: [UInt64: Double]? = nil) -> String {
        // The APP column only when a sandboxed app has tasks (most machines have none).
        let apps = statuses.contains { !$0.app.isEmpty }
        var lines = [
            ["ID", "STATE", "PROGRESS"] + (speeds == nil ? [] : ["SPEED", "ETA"]) + (apps ? ["APP"] : []) + [
                "SESSION", "DESTINATION",
            ]
        ]
        for status in statuses {
            let progress =
                status.bytesExpected > 0
                ? "\(Int(min(1, Double(status.bytesWritten) / Double(status.bytesExpected)) * 100))%"
                : ByteCount.format(status.bytesWritten)
            // Names, sessions and messages come from servers and callers: escaped for the terminal.
            // An upload shows where it goes: `↑ file → URL`.
            var destination =
                status.isUpload
                ? "↑ \(DisplayText.escaped(status.source)) → \(DisplayText.escaped(status.url))"
                : DisplayText.escaped(status.destination)
            if !status.title.isEmpty { destination = "\(DisplayText.escaped(status.title)): \(destination)" }
            if !status.error.isEmpty { destination += " (\(DisplayText.escaped(status.errorMessage)))" }
            var row = [String(status.id), stateText(status), progress]
            if let speeds {
                let speed = speeds[status.id]
                row += [
                    speed.map { "\(ByteCount.format(Int64($0)))/s" } ?? "",
                    ProgressLine.eta(written: status.bytesWritten, expected: status.bytesExpected, speed: speed),
                ]
            }
            if apps { row.append(status.app.isEmpty ? "-" : DisplayText.escaped(status.app)) }
            lines.append(row + [DisplayText.escaped(status.session), destination])
        }
        let padded = lines[0].count - 1
        let widths = (0..<padded).map { column in lines.map { $0[column].count }.max() ?? 0 }
        return lines.map { row in
            (0..<padded).map { row[$0] + String(repeating: " ", count: max(0, widths[$0] - row[$0].count)) }.joined(
                separator: "  ")
                + "  " + row[padded]
        }.joined(separator: "\n")
    }

    /// `task 3 running 42% 12 MiB of 29 MiB, 3.2 MiB/s`, `task 4 failed 0 B: the server answered
    /// 404 Not Found`: one task as `watch` prints it into a pipe (the speed only where measured).
    static func line(_ status: DownloadTaskStatus, speed: Double?) -> String {
        var line =
            "\(status.isUpload ? "upload" : "task") \(status.id) \(stateText(status)) "
            + ProgressLine.plain(written: status.bytesWritten, expected: status.bytesExpected, speed: speed)
        if !status.error.isEmpty { line += ": \(DisplayText.escaped(status.errorMessage))" }
        return line
    }

    /// The state as a person reads it: `waiting (network)` for a queued task held back by
    /// something other than the limits, `running (yielding)` for a background task giving way.
    static func stateText(_ status: DownloadTaskStatus) -> String {
        if status.waitingFor == "yielding" { return "running (yielding)" }
        return status.waitingFor.isEmpty || status.waitingFor == "slot"
            ? status.state : "waiting (\(status.waitingFor))"
    }
}
