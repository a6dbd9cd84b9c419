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

/// Follows one task to its end for `get`: a progress bar on a terminal (standard error), plain
/// lines at most once a second otherwise (from the first byte on); Ctrl-C pauses the task and
/// says how to resume.
struct TaskFollower {
    let proxy: DownloadsProxy
    let path: ObjectPath
    let service: ServiceOptions

    var id: String { DownloadsAPI.taskID(path).map(String.init) ?? path.rawValue }

    /// Returns the finished task's status (a download's file is its `destination`); throws
    /// `CommandFailure` or `ExitCode(130)`.
    func follow() async throws -> DownloadTaskStatus {
        let interrupt = Interrupt()
        let terminal = isatty(STDERR_FILENO) == 1
        var line = ProgressLine()
        var lastPlain = 0.0
        var lastRetrying: String?
        var lastSpeed: Double?
        let started = Date().timeIntervalSince1970
        while true {
            let status = try await proxy.status(path)
            let now = Date().timeIntervalSince1970
            var speed = line.measure(bytes: status.bytesWritten, at: now)
            // Once every byte is in, the service is finishing (sync, rename): the speed shown is the
            // last one measured while bytes came (none if none was), not a 0 B/s over the finish.
            if status.bytesExpected > 0, status.bytesWritten >= status.bytesExpected {
                speed = lastSpeed
            } else if let speed {
                lastSpeed = speed
            }
            // While the service waits to try again, why (a server's text: escaped).
            let retrying =
                status.state == "retrying" && !status.errorMessage.isEmpty
                ? "retrying after: \(DisplayText.escaped(status.errorMessage))" : nil
            if terminal {
                let width = Int(ProcessInfo.processInfo.environment["COLUMNS"] ?? "") ?? 80
                let text =
                    retrying.map { String($0.prefix(max(20, width - 1))) }
                    ?? ProgressLine.bar(
                        written: status.bytesWritten, expected: status.bytesExpected, speed: speed ?? 0, width: width)
                write("\r\u{1B}[K" + text)
            } else if let retrying, retrying != lastRetrying {
                write(retrying + "\n")
            } else if retrying == nil, status.bytesWritten > 0 || status.state == "finished",
                now - lastPlain >= 1 || status.isEnded
            {
                // Plain lines start with the first byte: a request refused at once (a 404) is one
                // line saying why, not a `0 B, 0 B/s` before it.
                lastPlain = now
                write(
                    ProgressLine.plain(written: status.bytesWritten, expected: status.bytesExpected, speed: speed)
                        + "\n")
            }
            lastRetrying = retrying
            switch status.state {
            case "finished":
                if terminal { write("\n") }
                if !status.isUpload, status.responseStatus == 304 {
                    write("not modified: the server's file is the one you have; nothing written\n")
                    return status
                }
                let seconds = max(0.001, now - started)
                let answered = status.isUpload ? "; the server answered \(status.responseStatus)" : ""
                write(
                    "\(status.isUpload ? "uploaded" : "downloaded") \(ByteCount.format(status.bytesWritten)) in \(ByteCount.duration(seconds))\(answered)\n"
                )
                return status
            case "failed":
                if terminal { write("\n") }
                var text = "\(status.kind) failed: \(DisplayText.escaped(status.errorMessage))"
                if service.verbose { text += " (\(status.error))" }
                // Offered only where trying again may get further (not after a 404).
                if let name = DownloadsErrorName(fullName: status.error),
                    name.isWorthResuming(message: status.errorMessage)
                {
                    text += "; resume with: \(resumeCommand)"
                }
                throw CommandFailure(message: text)
            case "cancelled":
                if terminal { write("\n") }
                throw CommandFailure(message: "the \(status.kind) was cancelled")
            default:
                break
            }
            if interrupt.isRaised {
                if terminal { write("\n") }
                _ = try await proxy.pause(path)
                write("paused task \(id); resume with: \(resumeCommand)\n")
                throw ExitCode(130)
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    private var resumeCommand: String { service.command("resume", id) }

    private func write(_ text: String) {
        Output.write(text, to: STDERR_FILENO)
    }
}
